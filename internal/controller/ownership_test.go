package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

func getWorkObject(g Gomega, namespace, name string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("work.open-cluster-management.io/v1")
	w.SetKind("ManifestWork")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, w)).To(Succeed())
	return w
}

// appliedWork waits until the test's work agent has reported the work's
// generation applied (a status write), and returns the work.
func appliedWork(namespace, name string) *unstructured.Unstructured {
	var w *unstructured.Unstructured
	Eventually(func(g Gomega) {
		w = getWorkObject(g, namespace, name)
		conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Applied"), HaveKeyWithValue("observedGeneration", w.GetGeneration()))))
	}).Should(Succeed())
	return w
}

// userWork creates a ManifestWork a user made, under a manager of their own.
func userWork(namespace, name string, labels map[string]string, annotations map[string]string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "shop", "namespace": "default"},
		}}}},
	}}
	w.SetLabels(labels)
	w.SetAnnotations(annotations)
	Expect(k8s.Create(ctx, w, client.FieldOwner("kubectl-create"))).To(Succeed())
	return w
}

var signalSpec = &v1alpha1.DeletionSignal{WorkName: "alive", Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
	Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"}}`)}}}}

var _ = Describe("Objects the operator did not create", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("neither changes nor deletes a user's work named like the signal work, and holds the signal, saying why", func() {
		fleetCluster("nown-1", nil, true)
		// Even with the signal label: only the managed-by label says ours.
		userWork("nown-1", "alive", map[string]string{v1alpha1.SignalWorkLabel: "true", v1alpha1.ManagedByLabel: "team-shop"}, nil)
		mine := appliedWork("nown-1", "alive")
		rv := mine.GetResourceVersion()
		Expect(k8s.Create(ctx, cleanupPolicy("signal-own", v1alpha1.CleanupPolicySpec{DeletionSignal: signalSpec}))).To(Succeed())
		governedBy("nown-1", "signal-own")

		Eventually(func(g Gomega) {
			p := status("signal-own")(g)
			g.Expect(p.Status.NotOwned).To(BeEquivalentTo(1))
			g.Expect(condition(p, v1alpha1.ReadyCondition).Message).To(ContainSubstring("ManifestWork nown-1/alive"))
		}).Should(Succeed())
		Eventually(func() string { return strings.Join(events("nown-1"), "\n") }).
			Should(ContainSubstring(`NotOwned: ManifestWork nown-1/alive was not created by the operator (app.kubernetes.io/managed-by is "team-shop")`))
		Eventually(func() string { return strings.Join(events("signal-own"), "\n") }).Should(ContainSubstring("NotOwned: ManifestWork nown-1/alive"))
		Consistently(func(g Gomega) string { return getWorkObject(g, "nown-1", "alive").GetResourceVersion() }, "2s").
			Should(Equal(rv), "the user's work was written")

		By("holding the teardown at the signal, deleting nothing")
		work("nown-1", "app", nil)
		deleteCluster("nown-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "nown-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("held at the signal: ManifestWork nown-1/alive was not created by the operator"))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			w := getWorkObject(g, "nown-1", "alive")
			g.Expect(w.GetDeletionTimestamp()).To(BeNil())
			g.Expect(w.GetResourceVersion()).To(Equal(rv))
			g.Expect(objectGone("ManifestWork", "nown-1", "app")()).To(BeFalse())
		}, "2s").Should(Succeed())

		By("going on once the user removed their work")
		Expect(k8s.Delete(ctx, mine)).To(Succeed())
		clusterGone("nown-1")
		Eventually(func(g Gomega) {
			g.Expect(status("signal-own")(g).Status.NotOwned).To(BeZero())
		}).Should(Succeed())
	})

	It("neither changes nor deletes another team's cleanup-decisions ConfigMap, and says why", func() {
		fleetCluster("nown-cm", nil, true)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-policies"}})).To(Succeed())
		theirs := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.DecisionsConfigMap, Namespace: "team-policies",
				Labels: map[string]string{v1alpha1.ManagedByLabel: "team-x"}},
			Data: map[string]string{"owner": "team-x"},
		}
		Expect(k8s.Create(ctx, theirs)).To(Succeed())
		rv := theirs.ResourceVersion
		Expect(k8s.Create(ctx, cleanupPolicy("decide", v1alpha1.CleanupPolicySpec{Prune: &v1alpha1.Prune{Default: v1alpha1.PruneDeleteAll}}))).To(Succeed())
		root := rootPolicy("team-policies", "baseline", []map[string]any{cpTemplate("cp", "enforce", nil, readsDecisions("cp"))}, "nown-cm")

		Eventually(func(g Gomega) {
			g.Expect(status("decide")(g).Status.NotOwned).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Eventually(func() string { return strings.Join(events("baseline"), "\n") }).
			Should(ContainSubstring(`NotOwned: ConfigMap team-policies/cleanup-decisions was not created by the operator (app.kubernetes.io/managed-by is "team-x")`))
		cm := &corev1.ConfigMap{}
		Consistently(func(g Gomega) string {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(theirs), cm)).To(Succeed())
			return cm.ResourceVersion
		}, "2s").Should(Equal(rv), "their ConfigMap was written")

		By("not deleting it once no root Policy needs decisions")
		Expect(k8s.Delete(ctx, root)).To(Succeed())
		Consistently(func(g Gomega) string {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(theirs), cm)).To(Succeed())
			return cm.ResourceVersion
		}, "2s").Should(Equal(rv), "their ConfigMap was deleted or written")
	})
})
