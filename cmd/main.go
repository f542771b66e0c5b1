// Command manager runs cleanup-operator: the reconcilers of CleanupPolicies,
// ManagedClusters (their governance and teardown), ManifestWorks,
// ConfigurationPolicies and the prune decisions, the CleanupPolicy
// validating webhook, and the metrics and health endpoints, in one manager
// that internal/operator wires.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// flags are the manager's command-line flags.
type flags struct {
	metricsAddr, probeAddr, pprofAddr   string
	webhookCertPath, webhookCertName    string
	webhookCertKey                      string
	webhookCertRotation                 bool
	webhookSecretName                   string
	webhookServiceName                  string
	webhookConfigName                   string
	webhookPort                         int
	enableLeaderElection, secureMetrics bool
	enableHTTP2, createFlowControl      bool
	kubeAPIQPS                          float64
	kubeAPIBurst, clusterConcurrency    int
	leaderElectionNamespace             string
	leaseDuration, renewDeadline        time.Duration
	retryPeriod                         time.Duration
	progressInterval                    time.Duration
	confirmationMaxAge                  time.Duration
	operatorNamespace                   string
	recordsPerCluster                   int
	recordMaxAge                        time.Duration
	signalKinds                         kindsFlag
	signalMaxBytes, signalMaxTotalBytes int
	namespaceDeny                       string
	ocmCleanupUsers                     string
	blastRadius                         blastRadiusFlags
}

// kindsFlag is a comma-separated list of apiVersion/Kind; unset, the
// default signal kinds.
type kindsFlag []string

func (k *kindsFlag) String() string { return strings.Join(*k, ",") }

func (k *kindsFlag) Set(v string) error {
	*k = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*k = append(*k, s)
		}
	}
	return nil
}

func main() {
	var f flags
	f.bind(flag.CommandLine)
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	gogc, limit := tuneMemory(os.LookupEnv, cgroupLimitFiles)
	if gogc >= 0 {
		keepHeadroom(gogc, HeapHeadroom)
	}
	log.Info("Go runtime memory settings", "GOGC", gogcOf(gogc), "GOMEMLIMIT", limitOf(limit))
	if err := run(f, log); err != nil {
		log.Error(err, "exiting")
		os.Exit(1)
	}
}

// options are the operator's options the flags set, or an error naming
// the flag that is wrong.
func (f flags) options() (operator.Options, error) {
	opts := operator.Options{ClusterConcurrency: f.clusterConcurrency,
		FlowControl: f.createFlowControl, ProgressInterval: f.progressInterval,
		ConfirmationMaxAge: f.confirmationMaxAge, NamespaceDeny: splitPatterns(f.namespaceDeny),
		Records: teardown.RecordOptions{Namespace: f.operatorNamespace,
			Retention: record.Retention{PerCluster: f.recordsPerCluster, MaxAge: f.recordMaxAge}}}
	opts.OCMCleanupUsers = append([]string{}, splitPatterns(f.ocmCleanupUsers)...)
	opts.SignalLimits = admissionpolicy.SignalLimits{Kinds: f.signalKinds, MaxBytes: f.signalMaxBytes, MaxTotalBytes: f.signalMaxTotalBytes}
	if err := opts.SignalLimits.Validate(); err != nil {
		return opts, err
	}
	for _, p := range opts.NamespaceDeny {
		if _, err := path.Match(p, ""); err != nil {
			return opts, fmt.Errorf("--namespace-deny: %q is not a pattern: %w", p, err)
		}
	}
	var err error
	if opts.BlastRadius, err = f.blastRadius.budget(); err != nil {
		return opts, err
	}
	if f.recordsPerCluster < 0 || f.recordMaxAge < 0 {
		return opts, fmt.Errorf("--teardown-records-per-cluster and --teardown-record-max-age must not be negative")
	}
	if f.recordMaxAge > 0 && f.blastRadius.window > f.recordMaxAge {
		// The budget counts gone clusters by their records: see CheckWindow.
		return opts, fmt.Errorf("--blast-radius-window %s is longer than --teardown-record-max-age %s: the teardowns of clusters "+
			"already gone would not be counted for the whole window; shorten the window or raise the record age", f.blastRadius.window, f.recordMaxAge)
	}
	if f.progressInterval == 0 {
		opts.ProgressInterval = -1 // every change; the option's 0 is the default
	}
	return opts, nil
}

// bind registers every flag of the manager on fs.
func (f *flags) bind(fs *flag.FlagSet) {
	f.bindManager(fs)
	f.bindOperator(fs)
}

// bindManager registers the flags of what controller-runtime serves and
// runs: the metrics, probe, profiling and webhook endpoints, and leader
// election.
func (f *flags) bindManager(fs *flag.FlagSet) {
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0",
		"The address the metrics endpoint binds to, :8443 for HTTPS or :8080 for HTTP; 0 disables it.")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to; 0 disables it.")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0",
		"The address Go's profiling endpoints (/debug/pprof) bind to, for diagnosing CPU and memory; 0 disables them. Bind it to localhost.")
	fs.BoolVar(&f.enableLeaderElection, "leader-elect", false,
		"Enable leader election, so that only one manager of several is active.")
	fs.StringVar(&f.leaderElectionNamespace, "leader-elect-namespace", "",
		"The namespace of the leader-election Lease; empty: the manager's own namespace, when it runs in a cluster.")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long the other managers wait before taking over a Lease the leader stopped renewing.")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader retries renewing its Lease before it gives up leading (and exits).")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often the managers try to acquire or renew the Lease.")
	fs.BoolVar(&f.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, with authentication and authorization; false serves plain HTTP.")
	fs.StringVar(&f.webhookCertPath, "webhook-cert-path", "", "The folder of the webhook certificate; empty uses the manager's default.")
	fs.StringVar(&f.webhookCertName, "webhook-cert-name", "tls.crt", "The webhook certificate file name.")
	fs.StringVar(&f.webhookCertKey, "webhook-cert-key", "tls.key", "The webhook key file name.")
	fs.BoolVar(&f.webhookCertRotation, "webhook-cert-rotation", false,
		"Manage the webhook's serving certificate: keep a CA and a certificate in --webhook-secret-name, write them to "+
			"--webhook-cert-path and the CA into --webhook-config-name's caBundle. Off: the certificate comes from elsewhere "+
			"(cert-manager, OLM).")
	fs.StringVar(&f.webhookSecretName, "webhook-secret-name", "cleanup-operator-webhook-server-cert",
		"With --webhook-cert-rotation: the Secret, in the operator's namespace, that holds the webhook's certificate and CA.")
	fs.StringVar(&f.webhookServiceName, "webhook-service-name", "cleanup-operator-webhook-service",
		"With --webhook-cert-rotation: the webhook's Service, in the operator's namespace, which the certificate names.")
	fs.StringVar(&f.webhookConfigName, "webhook-config-name", "cleanup-operator-validating-webhook-configuration",
		"With --webhook-cert-rotation: the ValidatingWebhookConfiguration whose caBundle is kept to the CA.")
	fs.IntVar(&f.webhookPort, "webhook-port", 9443, "The port the webhook server listens on.")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false,
		"Serve HTTP/2 on the metrics and webhook servers; off by default against HTTP/2 stream attacks.")
}

// bindOperator registers the flags of the operator's own work: its pace
// against the API server, its teardowns, their records, and the limits on
// what a policy may ask.
func (f *flags) bindOperator(fs *flag.FlagSet) {
	fs.Float64Var(&f.kubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS,
		"Queries per second to the API server, a guard against a runaway loop: the API server's priority and fairness "+
			"paces the operator (see --create-flow-control).")
	fs.IntVar(&f.kubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "Burst of queries to the API server.")
	fs.BoolVar(&f.createFlowControl, "create-flow-control", true,
		"Create the operator's FlowSchema and PriorityLevelConfiguration at start when they are absent.")
	fs.IntVar(&f.clusterConcurrency, "cluster-concurrency", operator.DefaultClusterConcurrency,
		"How many ManagedClusters are torn down at once; clusters governed (a finalizer and an annotation written) go four times as many at once.")
	fs.DurationVar(&f.progressInterval, "progress-interval", teardown.DefaultProgressInterval,
		"How often, at most, the progress of a running cleanup step (its counts) is written on the ManagedCluster's "+
			"ContentDeleteSuccess condition; a new step is written at once, and the metrics stay current. 0 writes every change.")
	fs.DurationVar(&f.confirmationMaxAge, "delete-confirmation-max-age", operator.DefaultConfirmationMaxAge,
		"How long a deletion confirmation (kubectl cleanup confirm-delete) of a deletion-protected ManagedCluster counts.")
	fs.StringVar(&f.operatorNamespace, "operator-namespace", "",
		"The operator's namespace, where teardown records are kept; empty: POD_NAMESPACE, else "+record.DefaultNamespace+".")
	f.signalKinds = kindsFlag(admissionpolicy.DefaultSignalLimits().Kinds)
	fs.Var(&f.signalKinds, "signal-manifest-kinds",
		"The kinds a CleanupPolicy's deletion-signal manifests may be, apiVersion/Kind, comma-separated, namespaced kinds only; "+
			"admission refuses the rest.")
	fs.IntVar(&f.signalMaxBytes, "signal-manifest-max-bytes", admissionpolicy.DefaultSignalLimits().MaxBytes,
		"The largest deletion-signal manifest, as JSON, that a CleanupPolicy may carry.")
	fs.IntVar(&f.signalMaxTotalBytes, "signal-manifests-max-total-bytes", admissionpolicy.DefaultSignalLimits().MaxTotalBytes,
		"The largest total, as JSON, of a CleanupPolicy's deletion-signal manifests.")
	fs.StringVar(&f.namespaceDeny, "namespace-deny", "",
		"Comma-separated namespaces (path.Match patterns, e.g. argocd,team-*) a teardown never deletes, beyond "+
			strings.Join(decision.DefaultNamespaceDeny, ",")+" and the operator's own namespace.")
	fs.StringVar(&f.ocmCleanupUsers, "ocm-cleanup-users", strings.Join(admissionpolicy.DefaultOCMCleanupUsers, ","),
		"Comma-separated users OCM's resource cleanup deletes add-ons and works as (its registration controller); "+
			"admission holds their deletes in the namespaces of governed clusters until the policy's teardown decides. "+
			"Empty holds nothing.")
	fs.IntVar(&f.recordsPerCluster, "teardown-records-per-cluster", operator.DefaultRecordsPerCluster,
		"How many ended teardown records are kept per cluster, the newest; 0 keeps every one (within --teardown-record-max-age).")
	fs.DurationVar(&f.recordMaxAge, "teardown-record-max-age", operator.DefaultRecordMaxAge,
		"How long an ended teardown record is kept; 0 keeps it whatever its age (within --teardown-records-per-cluster).")
	f.blastRadius.bind(fs)
}

// The client-side rate limit by default: above what an API server serves a
// single client, so that it does not bind a teardown on a fleet hub;
// docs/operations/configuration.md says why.
const (
	DefaultKubeAPIQPS   = 1000
	DefaultKubeAPIBurst = 2000
)

// run builds the manager, sets the operator up in it and runs it until a
// termination signal.
func run(f flags, log logr.Logger) error {
	enableWebhooks, err := webhooksEnabled()
	if err != nil {
		return err
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	opts.EnableWebhooks = enableWebhooks
	var certs *certRotation
	if enableWebhooks && f.webhookCertRotation {
		if certs, err = newCertRotation(f, record.Namespace(f.operatorNamespace)); err != nil {
			return err
		}
	}
	mgr, err := newManager(f, certs)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if certs != nil {
		if err := certs.add(ctx, mgr); err != nil {
			return err
		}
	}
	if _, err := operator.Setup(ctx, mgr, opts); err != nil {
		return fmt.Errorf("setting up the operator: %w", err)
	}
	if err := addChecks(mgr, enableWebhooks, certs); err != nil {
		return err
	}
	log.Info("starting the manager", "webhooks", enableWebhooks)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// splitPatterns splits a comma-separated flag value, dropping empty items.
func splitPatterns(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// webhooksEnabled reads ENABLE_WEBHOOKS: false runs without the webhook
// server, as outside a cluster; unset means true.
func webhooksEnabled() (bool, error) {
	v, ok := os.LookupEnv("ENABLE_WEBHOOKS")
	if !ok {
		return true, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("ENABLE_WEBHOOKS must be true or false: %w", err)
	}
	return b, nil
}

// newManager creates the manager with the flags' API client limits, leader
// election, metrics and webhook servers; with certs, the webhook serves the
// certificate the manager rotates.
func newManager(f flags, certs *certRotation) (manager.Manager, error) {
	var tlsOpts []func(*tls.Config)
	if !f.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	webhookOpts := webhook.Options{TLSOpts: tlsOpts, Port: f.webhookPort}
	var certWatcher *certwatcher.CertWatcher
	if certs != nil {
		webhookOpts.TLSOpts = append(webhookOpts.TLSOpts, func(c *tls.Config) { c.GetCertificate = certs.files.GetCertificate })
	} else if f.webhookCertPath != "" {
		var err error
		certWatcher, err = certwatcher.New(filepath.Join(f.webhookCertPath, f.webhookCertName), filepath.Join(f.webhookCertPath, f.webhookCertKey))
		if err != nil {
			return nil, fmt.Errorf("loading the webhook certificate: %w", err)
		}
		webhookOpts.TLSOpts = append(webhookOpts.TLSOpts, func(c *tls.Config) { c.GetCertificate = certWatcher.GetCertificate })
	}
	metricsOpts := metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.secureMetrics, TLSOpts: tlsOpts}
	if f.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	cfg := ctrl.GetConfigOrDie()
	f.limit(cfg)
	mgrOpts := operator.ManagerOptions()
	mgrOpts.Metrics = metricsOpts
	mgrOpts.WebhookServer = webhook.NewServer(webhookOpts)
	mgrOpts.HealthProbeBindAddress = f.probeAddr
	mgrOpts.PprofBindAddress = f.pprofAddr
	mgrOpts.LeaderElection = f.enableLeaderElection
	mgrOpts.LeaderElectionID = v1alpha1.LeaderElectionID
	mgrOpts.LeaderElectionNamespace = f.leaderElectionNamespace
	mgrOpts.LeaseDuration = &f.leaseDuration
	mgrOpts.RenewDeadline = &f.renewDeadline
	mgrOpts.RetryPeriod = &f.retryPeriod
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if certWatcher != nil {
		if err := mgr.Add(certWatcher); err != nil {
			return nil, fmt.Errorf("adding the certificate watcher: %w", err)
		}
	}
	return mgr, nil
}

// limit sets the client-side rate limit of the flags on cfg.
func (f *flags) limit(cfg *rest.Config) {
	cfg.QPS = float32(f.kubeAPIQPS)
	cfg.Burst = f.kubeAPIBurst
}

// addChecks adds the health check and the ready check: ready once the
// webhook server has started, when it runs, and with certs once its
// certificate is in place.
func addChecks(mgr manager.Manager, enableWebhooks bool, certs *certRotation) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	readyCheck := healthz.Ping
	if enableWebhooks {
		started := mgr.GetWebhookServer().StartedChecker()
		readyCheck = started
		if certs != nil {
			readyCheck = func(req *http.Request) error {
				if err := certs.ready(); err != nil {
					return err
				}
				return started(req)
			}
		}
	}
	if err := mgr.AddReadyzCheck("readyz", readyCheck); err != nil {
		return fmt.Errorf("adding the ready check: %w", err)
	}
	return nil
}
