package controller_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// markOf is the mark on a namespace: the label's value and the policy it
// names.
func markOf(g Gomega, name string) [2]string {
	ns := &corev1.Namespace{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
	return [2]string{ns.Labels[v1alpha1.GovernedNamespaceLabel], ns.Annotations[v1alpha1.GoverningPolicyAnnotation]}
}

var _ = Describe("Coexisting with OCM's own cleanup", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("marks the namespace of a governed cluster only, and takes the mark off in dry run and once no policy governs it", func() {
		fleetCluster("mark-1", map[string]string{"env": "prod"}, true)
		fleetCluster("mark-2", map[string]string{"env": "dev"}, true)
		// OCM's cleanup finalizer changes nothing: the policy is Ready.
		mc := getCluster(Default, "mark-1")
		mc.SetFinalizers(append(mc.GetFinalizers(), v1alpha1.OCMResourceCleanupFinalizer))
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("marking", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		}))).To(Succeed())
		governedBy("mark-1", "marking")
		Eventually(func(g Gomega) [2]string { return markOf(g, "mark-1") }).Should(Equal([2]string{"true", "marking"}))
		Eventually(func(g Gomega) {
			g.Expect(condition(status("marking")(g), v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Consistently(func(g Gomega) [2]string { return markOf(g, "mark-2") }, "1s").Should(Equal([2]string{"", ""}))

		By("a dry run: OCM cleans the cluster as without the operator")
		setDryRun("marking", true)
		Eventually(func(g Gomega) [2]string { return markOf(g, "mark-1") }).Should(Equal([2]string{"", ""}))
		setDryRun("marking", false)
		Eventually(func(g Gomega) [2]string { return markOf(g, "mark-1") }).Should(Equal([2]string{"true", "marking"}))

		By("no policy governs it any more")
		Expect(k8s.Delete(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "marking"}})).To(Succeed())
		Eventually(func(g Gomega) [2]string { return markOf(g, "mark-1") }).Should(Equal([2]string{"", ""}))
		// OCM is not running here: its finalizer is taken off for it.
		removeFinalizerByHand(managedCluster("mark-1", nil), v1alpha1.OCMResourceCleanupFinalizer)
	})

	It("takes the mark off the namespace of a cluster deleted with no teardown of the operator's, so that OCM cleans it", func() {
		// As if governance had marked it, then the cluster was deleted
		// before its finalizer could be added (or it was removed by hand).
		fleetCluster("unheld-1", nil, true)
		mc := getCluster(Default, "unheld-1")
		mc.SetFinalizers([]string{v1alpha1.OCMResourceCleanupFinalizer})
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		Expect(k8s.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unheld-1"}}, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:"gone"}}}`,
				v1alpha1.GovernedNamespaceLabel, v1alpha1.GoverningPolicyAnnotation))))).To(Succeed())
		deleteCluster("unheld-1")
		Eventually(func(g Gomega) [2]string { return markOf(g, "unheld-1") }).Should(Equal([2]string{"", ""}))
		removeFinalizerByHand(managedCluster("unheld-1", nil), v1alpha1.OCMResourceCleanupFinalizer)
		clusterGone("unheld-1")
	})

	It("reports add-ons and works deleted by someone else while the teardown waits at its gate", func() {
		fleetCluster("ooo-1", nil, true)
		addon("ooo-1", "search")
		// Held by a finalizer of another controller, so that its deletion shows.
		w := work("ooo-1", "app", nil)
		Expect(k8s.Patch(ctx, w, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"finalizers":[%q,"example.com/hold"]}}`, v1alpha1.WorkAgentFinalizer))))).To(Succeed())
		app := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ooo-1", Labels: map[string]string{"app": "shop"}}}
		Expect(k8s.Create(ctx, app)).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("ordered", v1alpha1.CleanupPolicySpec{
			MonitoredResources: []v1alpha1.MonitoredResource{{
				GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				When:                 "object.metadata.labels[?'app'].hasValue()",
			}},
		}))).To(Succeed())
		governedBy("ooo-1", "ordered")
		Eventually(func(g Gomega) [2]string { return markOf(g, "ooo-1") }).Should(Equal([2]string{"true", "ordered"}))

		deleteCluster("ooo-1")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "ooo-1").Reason).To(Equal(v1alpha1.WaitingForMonitoredResourcesReason))
		}).Should(Succeed())
		By("someone else deletes a work before its stage")
		Expect(k8s.Delete(ctx, w)).To(Succeed())
		Eventually(func(g Gomega) {
			c := contentDelete(g, "ooo-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.DeletedOutOfOrderReason))
			g.Expect(c.Message).To(ContainSubstring("being deleted by someone other than the operator, before the step of the teardown " +
				"that deletes them: manifestworks.work.open-cluster-management.io/app"))
			g.Expect(c.Message).To(ContainSubstring("the API does not record who deleted them"))
			g.Expect(c.Message).To(ContainSubstring("configmaps/app"), "it still says what it waits for")
			g.Expect(events("ooo-1")).To(ContainElement(HavePrefix(v1alpha1.DeletedOutOfOrderReason + ": ")))
			p := status("ordered")(g)
			g.Expect(stalledWith(g, p, v1alpha1.TeardownsHeldReason)).To(ContainSubstring(v1alpha1.DeletedOutOfOrderReason + " on ooo-1"))
		}).Should(Succeed())
		Expect(objectGone("ManagedClusterAddOn", "ooo-1", "search")()).To(BeFalse(), "the teardown keeps waiting at its gate")

		By("the deleted work goes; the gate opens; the teardown ends")
		removeFinalizerByHand(w, "example.com/hold")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "ooo-1").Reason).To(Equal(v1alpha1.WaitingForMonitoredResourcesReason))
		}).Should(Succeed())
		Expect(k8s.Delete(ctx, app)).To(Succeed())
		clusterGone("ooo-1")
		Expect(objectGone("ManagedClusterAddOn", "ooo-1", "search")()).To(BeTrue())
		rec := endedRecord("ooo-1")
		Expect(rec.Holds).To(ContainElement(HaveField("Reason", ContainSubstring(
			"deleted by someone other than the operator before their step: manifestworks.work.open-cluster-management.io/app"))))
	})
})
