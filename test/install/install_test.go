package install_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestInstallGovernsAFleet applies each installing path to a fresh control
// plane and runs the manager as installed (manager_test.go).
func TestInstallGovernsAFleet(t *testing.T) {
	manager := managerBinary(t)
	for _, p := range paths() {
		if p.install == nil {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			objs := p.render(t)
			env := startControlPlane(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			admin, err := client.New(env.Config, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p.install(ctx, t, env, objs)
			run := startManager(ctx, t, env, admin, manager, objs)
			governsAFleet(ctx, t, admin, run)
		})
	}
}

// startControlPlane starts kube-apiserver and etcd with only what the
// install's docs list as prerequisites: the OCM and policy CRDs.
//
// The API server must reach the webhook behind the installed Service and
// ValidatingWebhookConfiguration as they are, with no kube-proxy to route a
// Service's cluster IP: with --enable-aggregator-routing the API server
// dials a Service's endpoints instead of its cluster IP, for webhooks too,
// so the test gives the Service an EndpointSlice pointing at the manager
// process (startManager).
func startControlPlane(t *testing.T) *envtest.Environment {
	t.Helper()
	crds, err := testenv.CRDsDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(crds, "ocm"), filepath.Join(crds, "policy")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: testenv.BinDir(),
	}
	env.ControlPlane.GetAPIServer().Configure().Set("enable-aggregator-routing", "true")
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env
}

// applyObjects installs the rendered objects as an administrator.
func applyObjects(ctx context.Context, t *testing.T, env *envtest.Environment, objs objects) {
	t.Helper()
	admin, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	apply(ctx, t, admin, objs)
}

// apply applies the objects with server-side apply, the CRDs first and
// established, then the namespaces, then the rest.
func apply(ctx context.Context, t *testing.T, c client.Client, objs objects) {
	t.Helper()
	order := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "CustomResourceDefinition":
			return 0
		case "Namespace":
			return 1
		}
		return 2
	}
	for stage := 0; stage <= 2; stage++ {
		for _, u := range objs {
			if order(u) != stage {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
				client.FieldOwner("install-test"), client.ForceOwnership); err != nil {
				t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
			}
			if stage == 0 {
				waitEstablished(ctx, t, c, u.GetName())
			}
		}
	}
}

func waitEstablished(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if c.Get(ctx, client.ObjectKey{Name: name}, crd) != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, cond := range conds {
			m := cond.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	}).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue(), "CRD %s established", name)
}

// webhookEndpoint gives the webhook Service an EndpointSlice at this
// machine's first non-loopback IPv4 address (the API server refuses a
// loopback endpoint), on the manager's webhook port.
func webhookEndpoint(ctx context.Context, t *testing.T, c client.Client, svc *corev1.Service, port int32) {
	t.Helper()
	ip := hostIP(t)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-test", Namespace: svc.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(svc.Spec.Ports[0].Name), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := c.Create(ctx, slice); err != nil {
		t.Fatalf("creating the webhook's EndpointSlice: %v", err)
	}
}

func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no non-loopback IPv4 address for the webhook's endpoint")
	return ""
}

// impersonatingKubeconfig writes a kubeconfig of an administrator that
// impersonates the ServiceAccount, so that the manager has exactly the
// permissions the install grants it.
func impersonatingKubeconfig(t *testing.T, env *envtest.Environment, ns, sa string) string {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: "install-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
	}
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// governsAFleet checks the running manager's webhook, through the API
// server, and that it governs a ManagedCluster a policy selects.
func governsAFleet(ctx context.Context, t *testing.T, c client.Client, run *managerRun) {
	g := NewWithT(t)
	invalid := cleanupPolicy("install-invalid", "size(cluster.metadata.labels)")
	err := c.Create(ctx, invalid)
	g.Expect(err).To(HaveOccurred(), "the webhook refuses a selector that is not a bool")
	g.Expect(err.Error()).To(And(ContainSubstring(`admission webhook "vcleanuppolicy-v1alpha1.cleanup.fleetops.dev" denied the request`),
		ContainSubstring("spec.clusterSelector")), run.logs())

	policy := cleanupPolicy("install-test", "cluster.metadata.labels['env'] == 'install-test'")
	g.Expect(c.Create(ctx, policy)).To(Succeed(), run.logs())

	// The installed rights let the operator create every admission policy
	// it guards (the bootstrap role): a path without them runs unguarded.
	for _, obj := range admissionpolicy.AllObjects(admissionpolicy.DefaultOperatorUser) {
		g.Eventually(func() error {
			return c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "%T %s: %s", obj, obj.GetName(), run.logs())
	}

	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("cluster.open-cluster-management.io/v1")
	cluster.SetKind("ManagedCluster")
	cluster.SetName("install-cluster")
	cluster.SetLabels(map[string]string{"env": "install-test"})
	g.Expect(unstructured.SetNestedField(cluster.Object, true, "spec", "hubAcceptsClient")).To(Succeed())
	g.Expect(c.Create(ctx, cluster)).To(Succeed())

	g.Eventually(func() []string {
		_ = c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)
		return cluster.GetFinalizers()
	}).WithContext(ctx).WithTimeout(3*time.Minute).Should(ContainElement(v1alpha1.ClusterCleanupFinalizer), run.logs)
	g.Eventually(func() string {
		_ = c.Get(ctx, client.ObjectKeyFromObject(policy), policy)
		conds, _, _ := unstructured.NestedSlice(policy.Object, "status", "conditions")
		for _, cond := range conds {
			if m := cond.(map[string]any); m["type"] == v1alpha1.ReadyCondition {
				return fmt.Sprint(m["status"])
			}
		}
		return ""
	}).WithContext(ctx).WithTimeout(3*time.Minute).Should(Equal("True"), run.logs)
}

func cleanupPolicy(name, selector string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "CleanupPolicy",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"clusterSelector": selector,
			"removeStrategy": map[string]any{"default": string(v1alpha1.RemoveStrategyRequired)}},
	}}
	return u
}

// logsOf reads a file for a failure message.
func logsOf(file string) string {
	raw, _ := os.ReadFile(file)
	s := string(raw)
	if len(s) > 20000 {
		s = "..." + s[len(s)-20000:]
	}
	return "manager log:\n" + strings.TrimSpace(s)
}
