// Command manager runs cleanup-operator: the CleanupPolicy controller and its
// validating webhook.
package main

import (
	"crypto/tls"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
)

func main() {
	var (
		metricsAddr, probeAddr              string
		webhookCertPath, webhookCertName    string
		webhookCertKey                      string
		enableLeaderElection, secureMetrics bool
		enableHTTP2                         bool
		kubeAPIQPS                          float64
		kubeAPIBurst, clusterConcurrency    int
		leaderElectionNamespace             string
		leaseDuration, renewDeadline        time.Duration
		retryPeriod                         time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0",
		"The address the metrics endpoint binds to, :8443 for HTTPS or :8080 for HTTP; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to; 0 disables it.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false,
		"Enable leader election, so that only one manager of several is active.")
	flag.StringVar(&leaderElectionNamespace, "leader-elect-namespace", "",
		"The namespace of the leader-election Lease; empty: the manager's own namespace, when it runs in a cluster.")
	flag.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long the other managers wait before taking over a Lease the leader stopped renewing.")
	flag.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader retries renewing its Lease before it gives up leading (and exits).")
	flag.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often the managers try to acquire or renew the Lease.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, with authentication and authorization; false serves plain HTTP.")
	flag.StringVar(&webhookCertPath, "webhook-cert-path", "", "The folder of the webhook certificate; empty uses the manager's default.")
	flag.StringVar(&webhookCertName, "webhook-cert-name", "tls.crt", "The webhook certificate file name.")
	flag.StringVar(&webhookCertKey, "webhook-cert-key", "tls.key", "The webhook key file name.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false,
		"Serve HTTP/2 on the metrics and webhook servers; off by default against HTTP/2 stream attacks.")
	flag.Float64Var(&kubeAPIQPS, "kube-api-qps", 50, "Queries per second to the API server.")
	flag.IntVar(&kubeAPIBurst, "kube-api-burst", 100, "Burst of queries to the API server.")
	flag.IntVar(&clusterConcurrency, "cluster-concurrency", operator.DefaultClusterConcurrency,
		"How many ManagedClusters are reconciled, and so torn down, at once.")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	// ENABLE_WEBHOOKS=false runs without the webhook server, as outside a cluster.
	enableWebhooks := true
	if v, ok := os.LookupEnv("ENABLE_WEBHOOKS"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			log.Error(err, "ENABLE_WEBHOOKS must be true or false")
			os.Exit(1)
		}
		enableWebhooks = b
	}

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}

	webhookOpts := webhook.Options{TLSOpts: tlsOpts}
	var certWatcher *certwatcher.CertWatcher
	if webhookCertPath != "" {
		var err error
		certWatcher, err = certwatcher.New(filepath.Join(webhookCertPath, webhookCertName), filepath.Join(webhookCertPath, webhookCertKey))
		if err != nil {
			log.Error(err, "loading the webhook certificate")
			os.Exit(1)
		}
		webhookOpts.TLSOpts = append(webhookOpts.TLSOpts, func(c *tls.Config) { c.GetCertificate = certWatcher.GetCertificate })
	}

	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS = float32(kubeAPIQPS)
	cfg.Burst = kubeAPIBurst
	mgrOpts := operator.ManagerOptions()
	mgrOpts.Metrics = metricsOpts
	mgrOpts.WebhookServer = webhook.NewServer(webhookOpts)
	mgrOpts.HealthProbeBindAddress = probeAddr
	mgrOpts.LeaderElection = enableLeaderElection
	mgrOpts.LeaderElectionID = v1alpha1.LeaderElectionID
	mgrOpts.LeaderElectionNamespace = leaderElectionNamespace
	mgrOpts.LeaseDuration = &leaseDuration
	mgrOpts.RenewDeadline = &renewDeadline
	mgrOpts.RetryPeriod = &retryPeriod
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	if certWatcher != nil {
		if err := mgr.Add(certWatcher); err != nil {
			log.Error(err, "adding the certificate watcher")
			os.Exit(1)
		}
	}

	ctx := ctrl.SetupSignalHandler()
	if _, err := operator.Setup(ctx, mgr, operator.Options{EnableWebhooks: enableWebhooks, ClusterConcurrency: clusterConcurrency}); err != nil {
		log.Error(err, "setting up the operator")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	readyCheck := healthz.Ping
	if enableWebhooks {
		readyCheck = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", readyCheck); err != nil {
		log.Error(err, "adding the ready check")
		os.Exit(1)
	}

	log.Info("starting the manager", "webhooks", enableWebhooks)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
