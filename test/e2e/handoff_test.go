package e2e

import (
	"time"

	. "github.com/onsi/gomega"
	workv1 "open-cluster-management.io/api/work/v1"
)

// Scenario 5c: Needless on a cluster whose works an orphaning rule had
// narrowed to SelectivelyOrphan (the ConfigMap only). The teardown gives
// every work Orphan, no rule narrows it again, and the agent applies it
// before the work goes: the ConfigMap and the Deployment both stay.
func scenarioNeedlessOverRules() {
	joinCluster(map[string]string{scenarioLabel: "5c"})
	cleanupPolicy(policyYAML("s5c", "5c", `
removeStrategy:
  default: Needless
orphaning:
- name: keep-config
  when: "manifest.kind == 'ConfigMap'"
`))
	governedBy("s5c")
	a := manifestWork("5c", "s5c-app", nil, nil)
	Eventually(func(g Gomega) *workv1.DeleteOption { return workDeleteOption(g, a.work) }).Should(
		HaveField("PropagationPolicy", workv1.DeletePropagationPolicyTypeSelectivelyOrphan),
		"the orphaning rule was not stamped while the cluster lived")

	tl := newTimeline("scenario 5c: Needless over an orphaning rule", clusterWatches("5c")...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	hubClean()
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}), "Needless deleted what a rule had not orphaned")
	Expect(ownedByAgent(a.configMap)).To(BeFalse())
	Expect(ownedByAgent(a.deployment)).To(BeFalse())
	Eventually(clusterEvents).Should(ContainElement("Orphaned"))
	tl.before([]string{"ManifestWork cluster1/s5c-app deleteOption Orphan"}, []string{"ManifestWork cluster1/s5c-app deleting"})
}

// Scenario 5d: the operator is down (an upgrade) when the cluster is
// deleted and stays down past the policy's timeout; the work agent falls
// behind meanwhile, while the cluster stays Available. When the operator
// comes back it stamps Orphan and must wait for the agent however late it
// is: the timeout does not end the hand-off of an Available cluster.
func scenarioNeedlessOperatorDown() {
	joinCluster(map[string]string{scenarioLabel: "5d"})
	cleanupPolicy(policyYAML("s5d", "5d", `
removeStrategy:
  default: Needless
  timeout: 2s
`))
	governedBy("s5d")
	a := manifestWork("5d", "s5d-app", nil, nil)

	tl := newTimeline("scenario 5d: Needless after the operator was down past the timeout", clusterWatches("5d")...)
	tl.mark("test: operator stopped")
	manager.stop()
	tl.mark("test: work agent stopped (lease still renewed)")
	agent.stopWork()
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	time.Sleep(3 * time.Second) // the policy's timeout passes while the operator is down
	tl.mark("test: operator started")
	startOperator("manager-5d")
	Eventually(func(g Gomega) *workv1.DeleteOption { return workDeleteOption(g, a.work) }).Should(
		HaveField("PropagationPolicy", workv1.DeletePropagationPolicyTypeOrphan))
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Reason).To(Equal("CleanupFailed"))
		g.Expect(c.Message).To(ContainSubstring("manifestworks/s5d-app"))
		g.Expect(c.Message).To(ContainSubstring("the cluster is Available"))
	}).Should(Succeed())
	Consistently(func() bool { return deleting(a.work) }, "3s").Should(BeFalse(),
		"the work was deleted before the agent applied its Orphan")
	tl.mark("test: work agent started again")
	agent.start()
	hubClean()
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}), "Needless deleted what the agent had applied")
	tl.before([]string{"test: work agent started again"}, []string{"ManifestWork cluster1/s5d-app deleting"})
}
