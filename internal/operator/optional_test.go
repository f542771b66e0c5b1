package operator_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/stamp"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/controller"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// optionalCRDs are the CRDs a hub set up by OCM's quick start lacks.
var optionalCRDs = []string{controller.ConfigurationPolicyCRD, controller.PolicyCRD, controller.AddOnCRD}

// TestOptionalKinds runs the operator on a hub with only the ManagedCluster
// and ManifestWork CRDs, then installs the policy framework's and the
// add-on CRDs, then removes them, without restarting the operator.
func TestOptionalKinds(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(60 * time.Second)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	logs.reset()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.tail(300))
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	op, err := env.StartOperator(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(op.Stop()).To(Succeed()) }()
	h := &hub{g: g, ctx: ctx, k8s: k8s}

	g.Expect(k8s.Create(ctx, &v1alpha1.CleanupPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "prod"},
		Spec: v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
			RemoveStrategy:  v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
			Prune:           &v1alpha1.Prune{Default: v1alpha1.PruneDeleteAll},
		},
	})).To(Succeed())

	// Without the optional CRDs: the operator governs and tears down
	// clusters, says once what it does not do, and the policy is Ready.
	h.cluster("before")
	h.work("before", "app")
	h.governed("before")
	g.Eventually(func(g Gomega) {
		ready := h.ready(g)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		for _, crd := range optionalCRDs {
			g.Expect(ready.Message).To(ContainSubstring("CRD " + crd + " not installed"))
		}
	}).Should(Succeed())
	for _, crd := range optionalCRDs {
		g.Eventually(func() int { return logs.count("optional CRD not installed", `"`+crd+`"`) }).Should(Equal(1))
	}
	h.tearDown("before")
	g.Expect(h.gone("ManifestWork", "before", "app")).To(BeTrue())

	// The CRDs installed: prune stamps, published decisions and add-on
	// deletion start without a restart.
	crds, err := testenv.CRDsNamed(optionalCRDs...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds})).NotTo(BeEmpty())
	for _, crd := range optionalCRDs {
		g.Eventually(func() int { return logs.count("optional CRD installed", `"`+crd+`"`) }).Should(Equal(1))
	}
	g.Eventually(func(g Gomega) {
		ready := h.ready(g)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ready.Message).NotTo(ContainSubstring("not installed"))
	}).Should(Succeed())

	h.cluster("during")
	h.governed("during")
	h.configurationPolicy("during", "cp")
	g.Eventually(func(g Gomega) {
		cp := h.get(g, "ConfigurationPolicy", "during", "cp")
		behavior, _, _ := unstructured.NestedString(cp.Object, "spec", "pruneObjectBehavior")
		g.Expect(behavior).To(Equal(string(v1alpha1.PruneDeleteAll)))
		g.Expect(cp.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.PruneAnnotation, string(v1alpha1.PruneDeleteAll)))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(h.policy(g).Status.PoliciesStamped).To(BeEquivalentTo(1)) }).Should(Succeed())
	h.rootPolicy("during", "root", "cp-template")
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: v1alpha1.DecisionsConfigMap}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("during.cp-template", string(v1alpha1.PruneDeleteAll)))
	}).Should(Succeed())
	h.create("ManagedClusterAddOn", "during", "search", map[string]any{})
	h.tearDown("during")
	g.Expect(h.gone("ManagedClusterAddOn", "during", "search")).To(BeTrue())

	// The CRDs removed: the operator stops what needed them, says so
	// once, and goes on governing and tearing down clusters.
	h.deleteAllOf("ConfigurationPolicy", "Policy", "ManagedClusterAddOn")
	g.Expect(envtest.UninstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds})).To(Succeed())
	for _, crd := range optionalCRDs {
		g.Eventually(func() int { return logs.count("optional CRD removed", `"`+crd+`"`) }).Should(Equal(1))
	}
	g.Eventually(func(g Gomega) {
		ready := h.ready(g)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		for _, crd := range optionalCRDs {
			g.Expect(ready.Message).To(ContainSubstring("CRD " + crd + " not installed"))
		}
		g.Expect(h.policy(g).Status.PoliciesStamped).To(BeZero())
	}).Should(Succeed())
	h.cluster("after")
	h.work("after", "app")
	h.governed("after")
	h.tearDown("after")
	g.Expect(h.gone("ManifestWork", "after", "app")).To(BeTrue())

	// Installed again: prune stamps start again.
	cpCRD, err := testenv.CRDsNamed(controller.ConfigurationPolicyCRD)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: cpCRD})).NotTo(BeEmpty())
	t.Cleanup(func() { _ = envtest.UninstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: cpCRD}) })
	g.Eventually(func() int { return logs.count("optional CRD installed", `"`+controller.ConfigurationPolicyCRD+`"`) }).Should(Equal(2))
	h.cluster("again")
	h.governed("again")
	h.configurationPolicy("again", "cp")
	g.Eventually(func(g Gomega) {
		cp := h.get(g, "ConfigurationPolicy", "again", "cp")
		g.Expect(cp.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.PruneAnnotation, string(v1alpha1.PruneDeleteAll)))
	}).Should(Succeed())

	g.Consistently(op.Exited(), 2*time.Second).ShouldNot(Receive(), "the manager exited")
	for _, crd := range optionalCRDs {
		g.Expect(logs.count("optional CRD not installed", `"`+crd+`"`)).To(Equal(1), "said more than once: %s", crd)
		g.Expect(logs.count("optional CRD removed", `"`+crd+`"`)).To(Equal(1), "said more than once: %s", crd)
		installed := 1
		if crd == controller.ConfigurationPolicyCRD {
			installed = 2
		}
		g.Expect(logs.count("optional CRD installed", `"`+crd+`"`)).To(Equal(installed), "said more than once: %s", crd)
	}
	// Nothing lists or watches a kind that is not served.
	for _, e := range []string{"no matches for kind", "could not find the requested resource", "failed to list"} {
		g.Expect(logs.count(e)).To(BeZero(), "the log says %q", e)
	}
}

// TestRequiredKinds: without OCM's cluster manager the operator refuses to
// start, and says which CRD it needs.
func TestRequiredKinds(t *testing.T) {
	g := NewWithT(t)
	withoutCRDs(t, g, cel.ManifestWorkCRD)
	_, err := env.StartOperator(context.Background(), nil)
	g.Expect(err).To(MatchError(ContainSubstring("CRD " + cel.ManifestWorkCRD + " is not installed")))
}

// hub creates and reads objects for the test.
type hub struct {
	g   *WithT
	ctx context.Context
	k8s client.Client
}

var apiVersions = map[string]string{
	"ManagedCluster":      "cluster.open-cluster-management.io/v1",
	"ManifestWork":        "work.open-cluster-management.io/v1",
	"ManagedClusterAddOn": "addon.open-cluster-management.io/v1alpha1",
	"ConfigurationPolicy": "policy.open-cluster-management.io/v1",
	"Policy":              "policy.open-cluster-management.io/v1",
}

func object(kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersions[kind])
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func (h *hub) create(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := object(kind, namespace, name)
	u.Object["spec"] = spec
	h.g.Expect(h.k8s.Create(h.ctx, u)).To(Succeed())
	return u
}

func (h *hub) get(g Gomega, kind, namespace, name string) *unstructured.Unstructured {
	u := object(kind, namespace, name)
	g.Expect(h.k8s.Get(h.ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
	return u
}

func (h *hub) gone(kind, namespace, name string) bool {
	u := object(kind, namespace, name)
	return apierrors.IsNotFound(h.k8s.Get(h.ctx, client.ObjectKeyFromObject(u), u))
}

// cluster creates an Available ManagedCluster labelled env=prod, and its namespace.
func (h *hub) cluster(name string) {
	mc := object("ManagedCluster", "", name)
	mc.SetLabels(map[string]string{"env": "prod"})
	mc.Object["spec"] = map[string]any{"hubAcceptsClient": true}
	h.g.Expect(h.k8s.Create(h.ctx, mc)).To(Succeed())
	before := mc.DeepCopy()
	h.g.Expect(unstructured.SetNestedSlice(mc.Object, []any{map[string]any{
		"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "ManagedClusterAvailable",
		"message": "the agent is updating its lease", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}, "status", "conditions")).To(Succeed())
	h.g.Expect(h.k8s.Status().Patch(h.ctx, mc, client.MergeFrom(before))).To(Succeed())
	// After the cluster, with OCM's label, as OCM's registration makes it.
	h.g.Expect(h.k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{decision.OCMClusterNameLabel: name}}})).To(Succeed())
}

func (h *hub) work(namespace, name string) {
	h.create("ManifestWork", namespace, name, map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
	}}}})
}

// configurationPolicy creates a ConfigurationPolicy by server-side apply.
func (h *hub) configurationPolicy(namespace, name string) {
	u := object("ConfigurationPolicy", namespace, name)
	u.Object["spec"] = map[string]any{"remediationAction": "enforce", "severity": "low", "object-templates": []any{}}
	h.g.Expect(h.k8s.Patch(h.ctx, u, client.Apply, client.FieldOwner("gitops"))).To(Succeed())
}

// rootPolicy creates a root Policy in default with one ConfigurationPolicy
// template, and its replicated Policy in the cluster's namespace.
func (h *hub) rootPolicy(cluster, name, template string) {
	templates := []any{map[string]any{"objectDefinition": map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
		"metadata": map[string]any{"name": template},
		"spec": map[string]any{"remediationAction": "enforce", "severity": "low", "object-templates": []any{},
			"pruneObjectBehavior": `{{hub fromConfigMap .PolicyMetadata.namespace "cleanup-decisions" (printf "%s.%s" .ManagedClusterName "` + template + `") | default "None" hub}}`},
	}}}
	spec := map[string]any{"disabled": false, "policy-templates": templates}
	h.create("Policy", "default", name, spec)
	replicated := object("Policy", cluster, "default."+name)
	replicated.SetLabels(map[string]string{stamp.RootPolicyLabel: "default." + name, stamp.ClusterNameLabel: cluster})
	replicated.Object["spec"] = spec
	h.g.Expect(h.k8s.Create(h.ctx, replicated)).To(Succeed())
}

func (h *hub) deleteAllOf(kinds ...string) {
	for _, kind := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(apiVersions[kind])
		list.SetKind(kind + "List")
		h.g.Expect(h.k8s.List(h.ctx, list)).To(Succeed())
		for i := range list.Items {
			h.g.Expect(client.IgnoreNotFound(h.k8s.Delete(h.ctx, &list.Items[i]))).To(Succeed())
		}
	}
}

func (h *hub) policy(g Gomega) *v1alpha1.CleanupPolicy {
	p := &v1alpha1.CleanupPolicy{}
	g.Expect(h.k8s.Get(h.ctx, client.ObjectKey{Name: "prod"}, p)).To(Succeed())
	return p
}

func (h *hub) ready(g Gomega) *metav1.Condition {
	ready := meta.FindStatusCondition(h.policy(g).Status.Conditions, v1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	return ready
}

// governed waits until the operator governs the cluster.
func (h *hub) governed(name string) {
	h.g.Eventually(func(g Gomega) {
		mc := h.get(g, "ManagedCluster", "", name)
		g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "prod"))
	}).Should(Succeed())
}

// tearDown deletes the cluster and waits until the operator has cleaned
// its namespace up and let it go.
func (h *hub) tearDown(name string) {
	h.g.Expect(h.k8s.Delete(h.ctx, object("ManagedCluster", "", name))).To(Succeed())
	h.g.Eventually(func() bool { return h.gone("ManagedCluster", "", name) }).Should(BeTrue(), "cluster %s is still there", name)
	ns := &corev1.Namespace{}
	err := h.k8s.Get(h.ctx, client.ObjectKey{Name: name}, ns)
	h.g.Expect(apierrors.IsNotFound(err) || ns.DeletionTimestamp != nil).To(BeTrue(), "namespace %s is not being deleted", name)
}

// logs keeps the operator's log. The process has one logger, set once.
var logs = func() *logBuffer {
	l := &logBuffer{}
	logf.SetLogger(zap.New(zap.WriteTo(l), zap.UseDevMode(true)))
	return l
}()

// logBuffer keeps a log.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count counts the lines holding every one of parts.
func (l *logBuffer) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.SplitSeq(l.b.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

func (l *logBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(l.b.String(), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
