package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The users the contenders run as: the audit log tells their writes apart
// by user name.
const (
	userAdmin    = "bench-admin" // creates the fleet and deletes the clusters
	userAgent    = "work-agent"  // the simulated work agent
	userOperator = "cleanup-operator"
	userBare     = "bare-loop"
	userOCM      = "ocm-gc"
)

// auditPolicy records every write, at the Metadata level, one line each.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// paths are what the harness reads from the repository: bin/ (kube-apiserver,
// etcd, the CRDs `make crds` copies) and config/ (the CleanupPolicy CRD and
// the operator's RBAC).
type paths struct {
	root, bin string
	knobs     // what the run changes from the shipped defaults (readConfig)
}

// knobs are what a run may change from what users run, to look inside.
type knobs struct {
	// apiServerFlags are kube-apiserver flags beyond the harness's own
	// (BENCH_APISERVER_FLAGS: name=value apart by spaces), such as a hub's
	// tuning.
	apiServerFlags [][2]string
	// managerFlags are manager flags beyond the address ones
	// (BENCH_MANAGER_FLAGS), such as --pprof-bind-address.
	managerFlags []string
	// bareWaitsByWatch makes the bare loops wait for a group's removal
	// with a watch instead of a list every 20 ms (BENCH_BARE_WAIT=watch).
	bareWaitsByWatch bool
	// profileDir, when set (BENCH_PROFILE), receives CPU profiles of
	// kube-apiserver and the manager over profileWindow from each
	// teardown's start (BENCH_PROFILE_WINDOW, 6s by default); the manager
	// then serves pprof on managerPprofAddress.
	profileDir    string
	profileWindow time.Duration
	// split (BENCH_CPUS=split) runs kube-apiserver and etcd on the first
	// half of the machine's CPUs and the harness (its simulated agent and
	// in-process contenders) and the manager on the other half, as on a
	// hub whose API server has control-plane nodes of its own.
	split bool
}

func readKnobs() (knobs, error) {
	var k knobs
	for _, f := range strings.Fields(os.Getenv("BENCH_APISERVER_FLAGS")) {
		name, value, ok := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !ok || name == "" {
			return k, fmt.Errorf("BENCH_APISERVER_FLAGS: %q is not name=value", f)
		}
		k.apiServerFlags = append(k.apiServerFlags, [2]string{name, value})
	}
	k.managerFlags = strings.Fields(os.Getenv("BENCH_MANAGER_FLAGS"))
	switch w := env("BENCH_BARE_WAIT", "list"); w {
	case "list":
	case "watch":
		k.bareWaitsByWatch = true
	default:
		return k, fmt.Errorf("BENCH_BARE_WAIT: %q is neither list nor watch", w)
	}
	switch c := env("BENCH_CPUS", "shared"); c {
	case "shared":
	case "split":
		k.split = true
	default:
		return k, fmt.Errorf("BENCH_CPUS: %q is neither shared nor split", c)
	}
	if dir := os.Getenv("BENCH_PROFILE"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return k, fmt.Errorf("BENCH_PROFILE: %w", err)
		}
		window, err := time.ParseDuration(env("BENCH_PROFILE_WINDOW", "6s"))
		if err != nil || window < time.Second {
			return k, fmt.Errorf("BENCH_PROFILE_WINDOW: %q is not a duration of a second or more", os.Getenv("BENCH_PROFILE_WINDOW"))
		}
		k.profileDir, k.profileWindow = abs, window
		k.managerFlags = append(k.managerFlags, "--pprof-bind-address="+managerPprofAddress)
	}
	return k, nil
}

// String says what the knobs change, or nothing.
func (k knobs) String() string {
	var parts []string
	for _, f := range k.apiServerFlags {
		parts = append(parts, fmt.Sprintf("kube-apiserver --%s=%s", f[0], f[1]))
	}
	if len(k.managerFlags) > 0 {
		parts = append(parts, "manager "+strings.Join(k.managerFlags, " "))
	}
	if k.bareWaitsByWatch {
		parts = append(parts, "bare loops wait by watch")
	}
	if k.split {
		parts = append(parts, "kube-apiserver and etcd on CPUs "+controlPlaneCPUs()+", the harness and the manager on "+clientCPUs())
	}
	if k.profileDir != "" {
		parts = append(parts, fmt.Sprintf("CPU profiles of %s from each teardown's start into %s", k.profileWindow, k.profileDir))
	}
	return strings.Join(parts, "; ")
}

func findPaths() (paths, error) {
	root := os.Getenv("BENCH_REPO_ROOT")
	if root == "" {
		// go run and go test run in test/perf.
		root = filepath.Join("..", "..")
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return paths{}, err
	}
	p := paths{root: root, bin: filepath.Join(root, "bin")}
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		p.bin = dir
	}
	for _, f := range []string{"kube-apiserver", "etcd", "crds/ocm", "crds/policy"} {
		if _, err := os.Stat(filepath.Join(p.bin, f)); err != nil {
			return p, fmt.Errorf("no %s in %s: run 'make envtest-bins crds'", f, p.bin)
		}
	}
	return p, nil
}

// controlPlane is a kube-apiserver and etcd with OCM's CRDs (bin/crds/ocm),
// the policy CRDs (bin/crds/policy) and the CleanupPolicy CRD, writing every
// write request to an audit log.
type controlPlane struct {
	env      *envtest.Environment
	admin    *rest.Config
	auditLog string
	dir      string
}

// startControlPlane starts a kube-apiserver and etcd of their own, with
// the operator's, OCM's and the policy framework's CRDs, writing to an
// audit log in dir, and creates the operator's namespace.
func startControlPlane(p paths, dir string) (*controlPlane, error) {
	policy, auditLog, err := prepareAudit(dir)
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join(p.root, "config", "crd", "bases"),
			filepath.Join(p.bin, "crds", "ocm"),
			filepath.Join(p.bin, "crds", "policy"),
		},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: p.bin,
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", auditLog).
		Set("audit-log-mode", "blocking").
		// Never rotate (the default rotates at 100 MB, which a 100,000-work
		// fleet's creation passes): the harness reads one file.
		Set("audit-log-maxsize", "1000000")
	for _, f := range p.apiServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(f[0], f[1])
	}
	if _, err := env.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	cp := &controlPlane{env: env, auditLog: auditLog, dir: dir}
	if p.split {
		if err := splitCPUs(); err != nil {
			_ = cp.stop()
			return nil, err
		}
	}
	admin, err := cp.user(userAdmin, "system:masters")
	if err != nil {
		_ = cp.stop()
		return nil, err
	}
	admin.QPS, admin.Burst = -1, 0 // the harness itself is never the bottleneck
	cp.admin = admin
	// The operator keeps its teardown records in its namespace, which
	// config/default creates.
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		_ = cp.stop()
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-operator-system"}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		_ = cp.stop()
		return nil, err
	}
	return cp, nil
}

// prepareAudit writes the audit policy into dir and says where the audit
// log goes; a kept work folder may hold the log of an earlier run, which
// is removed so the harness reads this run's alone.
func prepareAudit(dir string) (policy, auditLog string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	policy = filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return "", "", err
	}
	auditLog = filepath.Join(dir, "audit.log")
	if err := os.Remove(auditLog); err != nil && !os.IsNotExist(err) {
		return "", "", err
	}
	return policy, auditLog, nil
}

func (cp *controlPlane) stop() error { return cp.env.Stop() }

// user returns a client configuration for a user of the given groups.
func (cp *controlPlane) user(name string, groups ...string) (*rest.Config, error) {
	u, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return rest.CopyConfig(u.Config()), nil
}

// kubeconfig writes a kubeconfig file for a user.
func (cp *controlPlane) kubeconfig(name string, groups ...string) (string, error) {
	u, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", err
	}
	raw, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	file := filepath.Join(cp.dir, name+".kubeconfig")
	return file, os.WriteFile(file, raw, 0o600)
}

// operatorKubeconfig binds the ClusterRoles the operator ships with
// (config/rbac/role.yaml, extra_resources_role.yaml and bootstrap_role.yaml,
// which creates its admission policies) to the operator's
// user and returns a kubeconfig for it.
func (cp *controlPlane) operatorKubeconfig(ctx context.Context, p paths) (string, error) {
	cs, err := kubernetes.NewForConfig(cp.admin)
	if err != nil {
		return "", err
	}
	for _, file := range []string{"role.yaml", "extra_resources_role.yaml", "bootstrap_role.yaml"} {
		roles, err := clusterRoles(filepath.Join(p.root, "config", "rbac", file))
		if err != nil {
			return "", err
		}
		for i := range roles {
			role := roles[i]
			if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
				return "", fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
			}
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + userOperator},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: userOperator}},
			}
			if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				return "", fmt.Errorf("binding ClusterRole %s: %w", role.Name, err)
			}
		}
	}
	// The teardown records' Role, in the operator's namespace.
	f, err := os.Open(filepath.Join(p.root, "config", "rbac", "teardown_record_role.yaml"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	role := &rbacv1.Role{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(role); err != nil {
		return "", err
	}
	role.Namespace = "cleanup-operator-system"
	if _, err := cs.RbacV1().Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating Role %s: %w", role.Name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + userOperator, Namespace: role.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: userOperator}},
	}
	if _, err := cs.RbacV1().RoleBindings(role.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("binding Role %s: %w", role.Name, err)
	}
	return cp.kubeconfig(userOperator)
}

func clusterRoles(file string) ([]rbacv1.ClusterRole, error) {
	docs, err := yamlDocs[rbacv1.ClusterRole](file)
	if err != nil {
		return nil, err
	}
	var roles []rbacv1.ClusterRole
	for _, role := range docs {
		if role.Kind == "ClusterRole" {
			roles = append(roles, role)
		}
	}
	return roles, nil
}

// yamlDocs decodes each YAML document of file into a T.
func yamlDocs[T any](file string) ([]T, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var docs []T
	for {
		var doc T
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		docs = append(docs, doc)
	}
}

// buildManager builds the manager from ./cmd of the repository, as shipped,
// into dir; BENCH_MANAGER names a binary to use instead. It says on w
// which.
func buildManager(p paths, dir string, w io.Writer) (string, error) {
	if bin := os.Getenv("BENCH_MANAGER"); bin != "" {
		fmt.Fprintf(w, "the manager: %s (BENCH_MANAGER), not built from ./cmd\n", bin)
		return filepath.Abs(bin)
	}
	fmt.Fprintf(w, "building the manager from %s/cmd\n", p.root)
	out := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", out, "./cmd")
	cmd.Dir = p.root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the manager from %s/cmd: %w", p.root, err)
	}
	return out, nil
}
