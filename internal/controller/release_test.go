package controller_test

import (
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/governance"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

func getPolicy(g Gomega, name string) *v1alpha1.CleanupPolicy {
	p := &v1alpha1.CleanupPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, p)).To(Succeed())
	return p
}

func policyGone(name string) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: name}, &v1alpha1.CleanupPolicy{}))
	}
}

func namespaceLabels(g Gomega, name string) map[string]string {
	ns := &corev1.Namespace{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
	return ns.Labels
}

// createWork creates a ManifestWork as a user or another controller would,
// and returns the API server's answer.
func createWork(namespace, name string, dryRun bool) error {
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"workload": map[string]any{"manifests": []any{}}},
	}}
	if dryRun {
		return k8s.Create(ctx, w, client.DryRunAll)
	}
	return k8s.Create(ctx, w)
}

// removeFinalizerByHand removes a finalizer as an administrator would.
func removeFinalizerByHand(obj client.Object, finalizer string) {
	Eventually(func(g Gomega) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
			return
		} else {
			g.Expect(err).NotTo(HaveOccurred())
		}
		var keep []string
		for _, f := range obj.GetFinalizers() {
			if f != finalizer {
				keep = append(keep, f)
			}
		}
		obj.SetFinalizers(keep)
		g.Expect(client.IgnoreNotFound(k8s.Update(ctx, obj))).To(Succeed())
	}).Should(Succeed())
}

var _ = Describe("Teardown ownership", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	// The interleaving of issue 11: the governing policy deleted in the
	// middle of a teardown, then the cluster re-imported under its name.
	It("finishes a teardown under a policy deleted mid-way, and a cluster re-imported under the name gets its works admitted", func() {
		fleetCluster("reim-1", nil, true)
		work("reim-1", "app", nil)
		agent.setStuck("reim-1", "app", true)
		Expect(k8s.Create(ctx, cleanupPolicy("reimport", v1alpha1.CleanupPolicySpec{KeepNamespace: "true"}))).To(Succeed())
		governedBy("reim-1", "reimport")
		Eventually(func(g Gomega) []string { return getPolicy(g, "reimport").Finalizers }).
			Should(ContainElement(v1alpha1.InUseFinalizer), "a policy that governs a cluster carries the in-use finalizer")

		deleteCluster("reim-1")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "reim-1").Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
			g.Expect(namespaceLabels(g, "reim-1")).To(HaveKeyWithValue(v1alpha1.ClusterDeletingLabel, "true"))
		}).Should(Succeed())

		By("deleting the policy mid-teardown: it stays, saying which teardown it waits for")
		Expect(k8s.Delete(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "reimport"}})).To(Succeed())
		Eventually(func(g Gomega) {
			p := getPolicy(g, "reimport")
			g.Expect(p.DeletionTimestamp).NotTo(BeNil())
			ready := condition(p, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.TerminatingReason))
			g.Expect(ready.Message).To(ContainSubstring("waiting for the teardown of 1 cluster(s) it governs: reim-1"))
			g.Expect(condition(p, v1alpha1.ReconcilingCondition)).NotTo(BeNil())
		}).Should(Succeed())
		Eventually(func() string { return strings.Join(events("reimport"), "\n") }).Should(ContainSubstring("InUse: being deleted"))
		Consistently(func(g Gomega) {
			g.Expect(getPolicy(g, "reimport").Finalizers).To(ContainElement(v1alpha1.InUseFinalizer))
			g.Expect(getCluster(g, "reim-1").GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		}, "2s").Should(Succeed())

		By("ending the teardown: the cluster goes, then the policy")
		agent.setStuck("reim-1", "app", false)
		clusterGone("reim-1")
		Eventually(policyGone("reimport")).Should(BeTrue())
		Expect(namespaceLabels(Default, "reim-1")).NotTo(HaveKey(v1alpha1.ClusterDeletingLabel))

		By("re-importing the cluster under the same name")
		fleetCluster2 := managedCluster("reim-1", nil)
		Expect(k8s.Create(ctx, fleetCluster2)).To(Succeed())
		Expect(createWork("reim-1", "new-app", false)).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("reimport-2", v1alpha1.CleanupPolicySpec{
			DeletionSignal: &v1alpha1.DeletionSignal{WorkName: "alive"},
		}))).To(Succeed())
		governedBy("reim-1", "reimport-2")
		Eventually(objectGone("ManifestWork", "reim-1", "alive")).Should(BeFalse(), "the operator's signal work is admitted")
	})

	// Governance read the cluster before its deletion; its teardown began
	// and labelled the namespace before governance read the namespace.
	It("leaves the label and the signal work of a teardown that began after governance read its cluster", func() {
		fleetCluster("ul-a", nil, false)
		mc := getClusterNow("ul-a")
		mc.SetFinalizers([]string{"test.fleetops.dev/hold"})
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		// Before the AfterEach, which waits for every cluster to go.
		defer removeFinalizerByHand(managedCluster("ul-a", nil), "test.fleetops.dev/hold")
		deleteCluster("ul-a")
		// Its signal work, made before the namespace is labelled, which
		// admission then refuses new works in.
		// Patched, not updated: the test's work agent writes the work's
		// status meanwhile.
		signal := work("ul-a", "signal", nil)
		before := signal.DeepCopy()
		signal.SetLabels(map[string]string{v1alpha1.SignalWorkLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy})
		Expect(k8s.Patch(ctx, signal, client.MergeFrom(before))).To(Succeed())
		ns := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "ul-a"}, ns)).To(Succeed())
		nsBefore := ns.DeepCopy()
		ns.Labels[v1alpha1.ClusterDeletingLabel] = "true"
		Expect(k8s.Patch(ctx, ns, client.MergeFrom(nsBefore))).To(Succeed())

		Expect(teardown.UnlabelNamespace(ctx, k8s, k8s, "ul-a")).To(Succeed())
		Expect(namespaceLabels(Default, "ul-a")).To(HaveKeyWithValue(v1alpha1.ClusterDeletingLabel, "true"))

		By("nor retires the signal work that teardown sends")
		Expect(governance.RetireSignalWorks(ctx, k8s, k8s, "ul-a", "")).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(signal), signal)).To(Succeed())
		Expect(signal.GetDeletionTimestamp()).To(BeNil())
		Expect(signal.Object["spec"]).NotTo(HaveKey("deleteOption"), "the signal work was stamped to be retired")
	})

	It("releases a deleting cluster whose policy vanished, leaving no label, annotation or finalizer of the operator's", func() {
		fleetCluster("rel-2", nil, true)
		work("rel-2", "app", nil)
		agent.setStuck("rel-2", "app", true)
		p := cleanupPolicy("vanishing", v1alpha1.CleanupPolicySpec{})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		governedBy("rel-2", "vanishing")
		// Another controller's finalizer keeps the cluster readable after
		// the operator lets it go.
		mc := getCluster(Default, "rel-2")
		mc.SetFinalizers(append(mc.GetFinalizers(), "example.com/hold"))
		anns := mc.GetAnnotations()
		anns[v1alpha1.ForcedObjectsAnnotation] = "1"
		mc.SetAnnotations(anns)
		Expect(k8s.Update(ctx, mc)).To(Succeed())

		deleteCluster("rel-2")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "rel-2").Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
		}).Should(Succeed())
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		By("an administrator removing the policy's in-use finalizer by hand")
		removeFinalizerByHand(p, v1alpha1.InUseFinalizer)
		Eventually(policyGone("vanishing")).Should(BeTrue())

		Eventually(func(g Gomega) {
			mc := getCluster(g, "rel-2")
			g.Expect(mc.GetFinalizers()).To(Equal([]string{"example.com/hold"}))
			g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.GoverningPolicyAnnotation))
			g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.ForcedObjectsAnnotation))
			g.Expect(namespaceLabels(g, "rel-2")).NotTo(HaveKey(v1alpha1.ClusterDeletingLabel))
		}).Should(Succeed())
		Expect(createWork("rel-2", "next", true)).To(Succeed(), "works are admitted in the namespace again")
		Expect(objectGone("ManifestWork", "rel-2", "app")()).To(BeFalse(), "a released cluster's content is left as it is")

		removeFinalizerByHand(mc, "example.com/hold")
		clusterGone("rel-2")
		agent.setStuck("rel-2", "app", false)
	})

	It("carries the in-use finalizer only while the policy governs a cluster, and releases clusters cleanly", func() {
		fleetCluster("rel-3", map[string]string{"env": "prod"}, true)
		// A label a teardown released by an earlier version left behind.
		ns := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "rel-3"}, ns)).To(Succeed())
		ns.Labels = map[string]string{v1alpha1.ClusterDeletingLabel: "true"}
		Expect(k8s.Update(ctx, ns)).To(Succeed())

		Expect(k8s.Create(ctx, cleanupPolicy("idle", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'none'",
		}))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("prod-only", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		}))).To(Succeed())
		governedBy("rel-3", "prod-only")
		Eventually(func(g Gomega) []string { return getPolicy(g, "prod-only").Finalizers }).Should(ContainElement(v1alpha1.InUseFinalizer))
		Eventually(func(g Gomega) map[string]string { return namespaceLabels(g, "rel-3") }).
			ShouldNot(HaveKey(v1alpha1.ClusterDeletingLabel), "a cluster not being deleted has no deleting label")
		Consistently(func(g Gomega) []string { return getPolicy(g, "idle").Finalizers }, "1s").
			ShouldNot(ContainElement(v1alpha1.InUseFinalizer), "a policy that governs nothing carries no finalizer")

		By("the selector no longer matching")
		mc := getCluster(Default, "rel-3")
		mc.SetLabels(map[string]string{"env": "dev"})
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		Eventually(func(g Gomega) {
			mc := getCluster(g, "rel-3")
			g.Expect(mc.GetFinalizers()).NotTo(ContainElement(v1alpha1.ClusterCleanupFinalizer))
			g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.GoverningPolicyAnnotation))
			g.Expect(getPolicy(g, "prod-only").Finalizers).NotTo(ContainElement(v1alpha1.InUseFinalizer))
		}).Should(Succeed())

		By("a policy deleted while its clusters are not being deleted goes at once, releasing them")
		mc = getCluster(Default, "rel-3")
		mc.SetLabels(map[string]string{"env": "prod"})
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		governedBy("rel-3", "prod-only")
		Expect(k8s.Delete(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "prod-only"}})).To(Succeed())
		Eventually(policyGone("prod-only")).Should(BeTrue())
		Eventually(func(g Gomega) {
			mc := getCluster(g, "rel-3")
			g.Expect(mc.GetFinalizers()).NotTo(ContainElement(v1alpha1.ClusterCleanupFinalizer))
			g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.GoverningPolicyAnnotation))
		}).Should(Succeed())
	})
})
