package e2e

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The guard rails' names, as the API contract states them.
const (
	hookPrefix      = "pre-cleanup.hook.cleanup.fleetops.dev/"
	waitingForHooks = "WaitingForHooks"
)

func patchCluster(patch string) {
	GinkgoHelper()
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName}}
	Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

func patchPolicy(name, patch string) {
	GinkgoHelper()
	p := &unstructured.Unstructured{}
	p.SetAPIVersion("cleanup.fleetops.dev/v1alpha1")
	p.SetKind("CleanupPolicy")
	p.SetName(name)
	Expect(k8s.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// Scenario 10: two pre-cleanup hooks hold a BestEffort cleanup past its
// timeout with nothing touched; removing one keeps holding; removing the
// second lets the cleanup run, and the agent deletes everything: nothing
// forced.
func scenarioHooks() {
	joinCluster(map[string]string{scenarioLabel: "10"})
	cleanupPolicy(policyYAML("s10", "10", `
removeStrategy:
  default: BestEffort
  timeout: 3s
deletionSignal:
  manifests:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: s10-alive
      namespace: `+workloadNamespace+`
`))
	governedBy("s10")
	a := manifestWork("10", "s10-app", nil, nil)
	backup, dns := hookPrefix+"backup", hookPrefix+"dns"
	patchCluster(fmt.Sprintf(`{"metadata":{"annotations":{%q:"pending",%q:"pending"}}}`, backup, dns))

	tl := newTimeline("scenario 10: pre-cleanup hooks", clusterWatches("10")...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(c.Reason).To(Equal(waitingForHooks))
		g.Expect(c.Message).To(And(ContainSubstring(backup), ContainSubstring(dns)))
	}).Should(Succeed())
	Eventually(clusterEvents).Should(ContainElement(waitingForHooks))
	// Past the 3s timeout: BestEffort would have forced by now.
	Consistently(func(g Gomega) {
		g.Expect(deleting(a.work)).To(BeFalse(), "a work was deleted while hooks held the cleanup")
		var sig workv1.ManifestWork
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: clusterName, Name: "cleanup-signal"}, &sig)).To(Succeed())
		g.Expect(sig.DeletionTimestamp).To(BeNil(), "the signal was sent while hooks held the cleanup")
		g.Expect(workDeleteOption(g, a.work)).To(BeNil(), "a work was stamped while hooks held the cleanup")
	}, "5s").Should(Succeed())

	tl.mark("test: hook backup removed")
	patchCluster(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, backup))
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Reason).To(Equal(waitingForHooks))
		g.Expect(c.Message).To(And(ContainSubstring(dns), Not(ContainSubstring(backup))))
	}).Should(Succeed())
	Consistently(func() bool { return deleting(a.work) }, "2s").Should(BeFalse(), "one hook left, and a work was deleted")
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))

	tl.mark("test: hook dns removed")
	patchCluster(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, dns))
	hubClean()
	Expect(a.onCluster()).To(BeEmpty(), "the agent did not delete the work's objects: were they forced?")
	Expect(clusterEvents()).NotTo(ContainElement("Forced"))
	tl.before([]string{"test: hook dns removed"}, []string{"ManifestWork cluster1/s10-app deleting"})
}

// Scenario 11: a suspended policy: a cluster deleted meanwhile, and a work
// added, get no write; resuming cleans everything up.
func scenarioSuspend() {
	joinCluster(map[string]string{scenarioLabel: "11"})
	cleanupPolicy(policyYAML("s11", "11", `
removeStrategy:
  default: Required
orphaning:
- name: keep-late
  when: "work.metadata.name == 's11-late'"
`))
	governedBy("s11")
	a := manifestWork("11", "s11-app", nil, nil)

	patchPolicy("s11", `{"spec":{"suspend":true}}`)
	Eventually(func(g Gomega) {
		p := &unstructured.Unstructured{}
		p.SetAPIVersion("cleanup.fleetops.dev/v1alpha1")
		p.SetKind("CleanupPolicy")
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "s11"}, p)).To(Succeed())
		g.Expect(condition(p, "Ready")).To(HaveField("Reason", "Suspended"))
	}).Should(Succeed())

	tl := newTimeline("scenario 11: a suspended policy", clusterWatches("11")...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	late := manifestWork("11", "s11-late", nil, nil)
	patchPolicy("s11", `{"spec":{"priority":5}}`)
	Consistently(func(g Gomega) {
		mc := &clusterv1.ManagedCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: clusterName}, mc)).To(Succeed())
		g.Expect(mc.Finalizers).To(ContainElement(clusterCleanupFinalizer))
		for _, c := range mc.Status.Conditions {
			g.Expect(c.Type).NotTo(Equal(contentDeleteCondition), "a condition was written while suspended")
		}
		g.Expect(deleting(a.work)).To(BeFalse(), "a work was deleted while suspended")
		g.Expect(workDeleteOption(g, late.work)).To(BeNil(), "a work was stamped while suspended")
	}, "4s").Should(Succeed())
	Expect(clusterEvents()).NotTo(ContainElement(waitingForHooks))

	tl.mark("test: CleanupPolicy s11 resumed")
	patchPolicy("s11", `{"spec":{"suspend":null}}`)
	hubClean()
	Expect(a.onCluster()).To(BeEmpty())
	Expect(late.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}), "the orphaning rule decided on resume keeps the late work's objects")
	tl.before([]string{"test: CleanupPolicy s11 resumed"}, []string{"ManifestWork cluster1/s11-app deleting"})
}
