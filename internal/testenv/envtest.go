package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Env is a running kube-apiserver and etcd with every CRD installed and the
// CleanupPolicy webhook registered.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	// Kubeconfig is a file for kubectl, as an administrator.
	Kubeconfig string
	// links holds the links that start etcd and kube-apiserver so that
	// they die with this process (see parentdeath_linux.go).
	links string
}

// BinDir is where `make envtest-bins` built kube-apiserver, etcd and kubectl.
func BinDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(RepoRoot(), "bin")
}

// Options choose what StartWith installs.
type Options struct {
	// WithoutCRDs names OCM and policy CRDs not to install, as on a hub
	// that lacks them.
	WithoutCRDs []string
	// AuditLog, if set, is the file where the API server writes the
	// writes to ManifestWorks and the deletions of ManagedClusters, one
	// JSON audit event a line (ReadAuditLog); the directory must exist.
	AuditLog string
	// AuditPolicy, if set with AuditLog, is the audit policy
	// (audit.k8s.io/v1 Policy, YAML) to log by instead.
	AuditPolicy string
}

// Start starts the control plane with every CRD.
func Start() (*Env, error) { return StartWith(Options{}) }

// StartWith starts the control plane with the CRDs opts choose.
func StartWith(opts Options) (*Env, error) {
	e, err := environment(opts)
	if err != nil {
		return nil, err
	}
	links, err := linkParentDeath(e.BinaryAssetsDirectory)
	if err != nil {
		return nil, err
	}
	if links != "" {
		e.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(links, "etcd")}
		e.ControlPlane.GetAPIServer().Path = filepath.Join(links, "kube-apiserver")
	}
	if opts.AuditLog != "" {
		policy, err := writeAuditPolicy(opts.AuditLog, opts.AuditPolicy)
		if err != nil {
			_ = os.RemoveAll(links)
			return nil, err
		}
		e.ControlPlane.GetAPIServer().Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", opts.AuditLog).
			Set("audit-log-mode", "blocking")
	}
	var cfg *rest.Config
	onParentThread(func() { cfg, err = e.Start() })
	if err != nil {
		_ = os.RemoveAll(links)
		return nil, fmt.Errorf("starting the test API server: %w", err)
	}
	env := &Env{Environment: e, Config: cfg, links: links}
	if env.Kubeconfig, err = adminKubeconfig(e); err != nil {
		_ = env.Stop()
		return nil, err
	}
	if err := CreateOperatorNamespace(context.Background(), cfg); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return env, nil
}

// environment is the envtest environment of opts: the binaries of bin/,
// the CRDs but those opts leaves out, and the operator's webhooks.
func environment(opts Options) (*envtest.Environment, error) {
	paths, err := CRDPaths()
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	if len(opts.WithoutCRDs) > 0 {
		all, err := LoadCRDs()
		if err != nil {
			return nil, err
		}
		for i := range all {
			if !slices.Contains(opts.WithoutCRDs, all[i].Name) {
				crds = append(crds, &all[i])
			}
		}
		paths = paths[:1] // the operator's own
	}
	bin := BinDir()
	if _, err := os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run 'make envtest-bins' (or 'make test')", bin)
	}
	return &envtest.Environment{
		CRDs:                  crds,
		CRDDirectoryPaths:     paths,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: bin,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(RepoRoot(), "config", "webhook", "manifests.yaml")},
		},
	}, nil
}

// adminKubeconfig writes a kubeconfig of a system:masters user to a
// temporary file and returns its path.
func adminKubeconfig(e *envtest.Environment) (string, error) {
	user, err := e.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "cleanup-envtest-kubeconfig-*")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Write(kubeconfig); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// Stop stops the control plane and removes the kubeconfig.
func (e *Env) Stop() error {
	if e.Kubeconfig != "" {
		_ = os.Remove(e.Kubeconfig)
	}
	err := e.Environment.Stop()
	if e.links != "" {
		_ = os.RemoveAll(e.links)
	}
	return err
}

// ManagerOptions fills in what a manager needs to run on this control plane:
// no metrics or probe listeners, and the webhook server where the API server
// expects it.
func (e *Env) ManagerOptions(base ctrl.Options) ctrl.Options {
	wh := e.WebhookInstallOptions
	base.Metrics = metricsserver.Options{BindAddress: "0"}
	base.HealthProbeBindAddress = "0"
	base.WebhookServer = webhook.NewServer(webhook.Options{
		Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
	})
	return base
}

// WaitForWebhook returns once the webhook server accepts TLS connections.
func (e *Env) WaitForWebhook(ctx context.Context) error {
	wh := e.WebhookInstallOptions
	addr := net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort))
	dialer := &net.Dialer{Timeout: time.Second}
	for {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook server at %s not ready: %w", addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Main runs the tests of a package on one API server that its files share:
// it starts the server with opts, hands it to share, runs the tests and
// stops the server. A package's TestMain calls it:
// os.Exit(testenv.Main(m, opts, share)).
func Main(m *testing.M, opts Options, share func(*Env) error) int {
	env, err := StartWith(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the API server:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		}
	}()
	if err := share(env); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
