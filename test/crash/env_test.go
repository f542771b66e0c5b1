package crash

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The identities the processes run as. The audit policy records every
// write of the operator's identities, and nothing else.
const (
	operatorUser = "cleanup-operator"
	// The two managers of the failover test run as two users, so that the
	// audit log tells which one wrote what.
	operatorUserA = "cleanup-operator-a"
	operatorUserB = "cleanup-operator-b"
	agentUser     = "crash-agent"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: RequestResponse
  users: ["` + operatorUser + `", "` + operatorUserA + `", "` + operatorUserB + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// controlPlane is a kube-apiserver and etcd with the OCM, policy and
// CleanupPolicy CRDs, writing an audit log of the operator's writes.
type controlPlane struct {
	env      *envtest.Environment
	dir      string
	auditLog string
	cfg      *rest.Config
	admin    client.Client
	dyn      dynamic.Interface
	// agent writes as the simulated work agent and add-on controller.
	agent client.Client
	// kubeconfigs are files per user, for the manager processes.
	kubeconfigs map[string]string
}

var shared struct {
	once    sync.Once
	err     error
	dir     string
	cp      *controlPlane
	manager string
}

// setup builds the manager and starts the control plane once for the
// package's tests; TestMain stops it.
func setup(t *testing.T) (*controlPlane, string) {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "cleanup-crash-*")
		if shared.err != nil {
			return
		}
		if shared.manager, shared.err = testenv.Build(shared.dir, "manager", "./cmd", "CRASH_MANAGER"); shared.err != nil {
			return
		}
		shared.cp, shared.err = startControlPlane(shared.dir)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cp, shared.manager
}

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	code := m.Run()
	if shared.cp != nil {
		_ = shared.cp.env.Stop()
	}
	if shared.dir != "" {
		if keep := os.Getenv("CRASH_KEEP"); keep != "" {
			if err := copyDir(shared.dir, keep); err != nil {
				fmt.Fprintln(os.Stderr, "keeping the logs:", err)
			}
		}
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func startControlPlane(dir string) (*controlPlane, error) {
	paths, err := testenv.CRDPaths()
	if err != nil {
		return nil, err
	}
	bin := testenv.BinDir()
	if _, err := os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run 'make envtest-bins' (or 'make test')", bin)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	cp := &controlPlane{dir: dir, auditLog: filepath.Join(dir, "audit.log"), kubeconfigs: map[string]string{}}
	cp.env = &envtest.Environment{
		CRDDirectoryPaths:     paths,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: bin,
	}
	cp.env.ControlPlane.GetAPIServer().Configure().
		Append("audit-policy-file", policy).
		Append("audit-log-path", cp.auditLog).
		// Written before the response returns: the log is never behind
		// what a client saw.
		Append("audit-log-mode", "blocking").
		// The witness watches from its start to its end: no compaction
		// may expire its resource versions.
		Append("etcd-compaction-interval", "0")
	if cp.cfg, err = cp.env.Start(); err != nil {
		return nil, fmt.Errorf("starting the test API server: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = cp.env.Stop()
		}
	}()
	scheme := operator.NewScheme()
	if cp.admin, err = client.New(cp.cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if cp.dyn, err = dynamic.NewForConfig(cp.cfg); err != nil {
		return nil, err
	}
	// Where the manager keeps its teardown records (config/default's).
	if err := testenv.CreateOperatorNamespace(context.Background(), cp.cfg); err != nil {
		return nil, err
	}
	// The RBAC the operator ships with is tested elsewhere (test/e2e,
	// internal/controller); here every identity is an administrator.
	for _, name := range []string{operatorUser, operatorUserA, operatorUserB, agentUser} {
		user, err := cp.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return nil, err
		}
		kubeconfig, err := user.KubeConfig()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, name+".kubeconfig")
		if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
			return nil, err
		}
		cp.kubeconfigs[name] = path
		if name == agentUser {
			if cp.agent, err = client.New(user.Config(), client.Options{Scheme: scheme}); err != nil {
				return nil, err
			}
		}
	}
	ok = true
	return cp, nil
}

func (cp *controlPlane) createNamespace(ctx context.Context, name string) error {
	return cp.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{decision.OCMClusterNameLabel: name}}})
}

// process is one run of the manager binary.
type process struct {
	name  string
	user  string
	cmd   *exec.Cmd
	done  chan struct{}
	err   error
	start int // the audit events logged before it started
}

// startManager runs the manager as user with its output appended to log.
func startManager(cp *controlPlane, bin, name, user string, log io.Writer, auditMark int, args ...string) (*process, error) {
	args = append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ENABLE_WEBHOOKS=false", "KUBECONFIG="+cp.kubeconfigs[user])
	cmd.Stdout, cmd.Stderr = log, log
	// The manager dies with the test, even a killed one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(log, "=== %s: %s %v\n", time.Now().UTC().Format(time.RFC3339Nano), name, args)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, user: user, cmd: cmd, done: make(chan struct{}), start: auditMark}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill ends the process with SIGKILL and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop ends the process with SIGTERM, as a rollout would, and waits for it.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) pid() string { return strconv.Itoa(p.cmd.Process.Pid) }

func copyDir(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "manager" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}
