package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// repoPaths are the folders the suite reads: the repository (our CRD and
// RBAC), bin/ (the binaries and the CRDs `make crds` copies) and the Go
// modules of the OCM components it runs (their CRDs, at their versions).
type repoPaths struct {
	root, bin string
	ocmAPI    string // open-cluster-management.io/api
	policy    string // open-cluster-management.io/governance-policy-propagator
	// policyVersion is the propagator's version this module file resolves.
	policyVersion string
}

func findRepoPaths() (repoPaths, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return repoPaths{}, err
	}
	p := repoPaths{root: root, bin: filepath.Join(root, "bin")}
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		p.bin = dir
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "manager", "e2e-propagator"} {
		if _, err := os.Stat(filepath.Join(p.bin, b)); err != nil {
			return p, fmt.Errorf("no %s in %s: run 'make test-e2e', which builds it", b, p.bin)
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}",
		"open-cluster-management.io/api", propagatorModule).Output()
	if err != nil {
		return p, fmt.Errorf("locating the OCM modules: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		return p, fmt.Errorf("locating the OCM modules: got %q", out)
	}
	p.ocmAPI, p.policy, p.policyVersion = f[0], f[2], f[3]
	return p, nil
}

// crdPaths lists the CRDs to install: OCM's hub and agent CRDs and the policy
// framework's, from the modules whose controllers run here;
// ConfigurationPolicy from bin/crds (the operator watches it); the
// CleanupPolicy CRD from config/crd/bases.
func crdPaths(p repoPaths) ([]string, error) {
	crds := []string{filepath.Join(p.root, "config", "crd", "bases")}
	for _, f := range []string{
		"cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml",
		"cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml",
		"cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml",
		"cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml",
		"cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml",
		"work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml",
		"work/v1/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml",
		addonCRDs(p.ocmAPI) + "/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml",
		addonCRDs(p.ocmAPI) + "/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml",
	} {
		crds = append(crds, filepath.Join(p.ocmAPI, f))
	}
	for _, f := range []string{
		"policy.open-cluster-management.io_policies.yaml",
		"policy.open-cluster-management.io_placementbindings.yaml",
		"policy.open-cluster-management.io_policysets.yaml",
	} {
		crds = append(crds, filepath.Join(p.policy, "deploy", "crds", f))
	}
	cfgPolicy := filepath.Join(p.bin, "crds", "policy", "policy.open-cluster-management.io_configurationpolicies.yaml")
	if _, err := os.Stat(cfgPolicy); err != nil {
		return nil, fmt.Errorf("no ConfigurationPolicy CRD in %s: run 'make crds'", filepath.Dir(cfgPolicy))
	}
	return append(crds, cfgPolicy), nil
}

// addonCRDs is the folder of the add-on CRDs as OCM's hub installs them:
// addon/v1beta1 where the module has it (they serve v1alpha1, stored, and
// v1beta1, with no conversion webhook: the versions differ in spec fields
// only, which the operator neither reads nor writes), else addon/v1alpha1.
func addonCRDs(api string) string {
	if _, err := os.Stat(filepath.Join(api, "addon", "v1beta1")); err == nil {
		return "addon/v1beta1"
	}
	return "addon/v1alpha1"
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(workv1.Install(s))
	utilruntime.Must(addonv1alpha1.Install(s))
	return s
}

// process is a binary the suite runs, its output in the log folder.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan error
	log  string
}

func startProcess(name, bin string, extraEnv []string, args ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), extraEnv...)
	// The process dies with the test binary even if the test is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan error, 1), log: logPath}
	go func() {
		p.done <- cmd.Wait()
		_ = out.Close()
	}()
	return p, nil
}

// exited reports whether the process has ended, without waiting.
func (p *process) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil {
			err = errors.New("exited")
		}
		return fmt.Errorf("%s %w; its log, %s, ends with:\n%s", p.name, err, p.log, tail(p.log))
	default:
		return nil
	}
}

func (p *process) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func tail(path string) string {
	raw, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// component is a set of controllers running in this process.
type component struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func runComponent(name string, run func(ctx context.Context) error) *component {
	cctx, stop := context.WithCancel(ctx)
	c := &component{cancel: stop, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(c.done)
		if err := run(cctx); err != nil && cctx.Err() == nil {
			Fail(fmt.Sprintf("%s stopped: %v", name, err))
		}
	}()
	return c
}

func (c *component) stop() {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
	}
}

// checkControllerManager proves both controllers run: a namespace is
// terminated, and an object whose owner is gone is collected.
func checkControllerManager() {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-owner", Namespace: "default"}}
	Expect(k8s.Create(ctx, owner)).To(Succeed())
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "gc-dependent", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	Expect(k8s.Create(ctx, dependent)).To(Succeed())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "namespace-controller-probe"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content", Namespace: ns.Name}})).To(Succeed())

	Expect(k8s.Delete(ctx, owner)).To(Succeed())
	Expect(k8s.Delete(ctx, ns)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(kcm.exited()).To(Succeed())
		g.Expect(gone(dependent)).To(BeTrue(), "the garbage collector has not collected the dependent")
		g.Expect(gone(ns)).To(BeTrue(), "the namespace controller has not removed the namespace")
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}

// operatorUser is the user bin/manager runs as.
const operatorUser = "cleanup-operator"

// operatorKubeconfig binds the ClusterRoles the operator ships with
// (config/rbac/role.yaml) to a user, plus a role for the test's own monitored
// resource, as config/rbac/extra_resources_role.yaml says to do, and returns
// a kubeconfig for that user.
func operatorKubeconfig() string {
	const user = operatorUser
	roles := clusterRoles(filepath.Join(paths.root, "config", "rbac", "role.yaml"))
	// The bootstrap role: creating and keeping the admission policies.
	roles = append(roles, clusterRoles(filepath.Join(paths.root, "config", "rbac", "bootstrap_role.yaml"))...)
	roles = append(roles, rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "cleanup-operator-e2e-extra"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{backupGroup}, Resources: []string{backupResource},
			Verbs: []string{"get", "list", "watch"},
		}},
	})
	for i := range roles {
		role := roles[i]
		Expect(k8s.Create(ctx, &role)).To(Succeed())
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})).To(Succeed())
	}
	// The teardown records: the operator's namespace, as config/default
	// installs it, and the Role it ships for ConfigMaps there.
	const namespace = "cleanup-operator-system"
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	f, err := os.Open(filepath.Join(paths.root, "config", "rbac", "teardown_record_role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	record := &rbacv1.Role{}
	Expect(yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(record)).To(Succeed())
	record.Namespace = namespace
	Expect(k8s.Create(ctx, record)).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: record.Name + "-" + user, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: record.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
	return writeKubeconfig(envtest.User{Name: user}, "operator.kubeconfig")
}

func clusterRoles(file string) []rbacv1.ClusterRole {
	f, err := os.Open(file)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var roles []rbacv1.ClusterRole
	for {
		var role rbacv1.ClusterRole
		err := dec.Decode(&role)
		if err != nil {
			Expect(err.Error()).To(Equal("EOF"), "reading %s", file)
			return roles
		}
		if role.Kind == "ClusterRole" {
			roles = append(roles, role)
		}
	}
}

// waitForOperator returns once the operator has created its admission
// policies, which it does when it starts.
func waitForOperator() {
	Eventually(func(g Gomega) {
		g.Expect(manager.exited()).To(Succeed())
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("admissionregistration.k8s.io/v1")
		list.SetKind("ValidatingAdmissionPolicyList")
		g.Expect(k8s.List(ctx, list)).To(Succeed())
		var names []string
		for _, item := range list.Items {
			names = append(names, item.GetName())
		}
		g.Expect(names).To(ContainElement("cleanup-operator-deleting-cluster"))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}

// gone reports whether an object no longer exists.
func gone(obj client.Object) bool {
	err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	if err != nil && !apierrors.IsNotFound(err) {
		Fail(err.Error())
	}
	return apierrors.IsNotFound(err)
}
