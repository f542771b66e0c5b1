package e2e

import (
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"
)

// workWatches are what a work-deletion timeline follows.
func workWatches(scenario string) []watched {
	return clusterWatches(scenario)[3:]
}

// Scenario 1: the policy orphans nothing, so the operator writes no
// deleteOption and OCM's default applies: the agent deletes what it applied.
func scenarioForeground() {
	joinCluster(map[string]string{scenarioLabel: "1"})
	cleanupPolicy(policyYAML("s1", "1", `
removeStrategy:
  default: Required
`))
	governedBy("s1")
	a := manifestWork("1", "s1-app", nil, nil)
	Consistently(func(g Gomega) *workv1.DeleteOption { return workDeleteOption(g, a.work) }, "1s").Should(BeNil(),
		"the operator wrote a deleteOption though no rule orphans anything")

	tl := newTimeline("scenario 1: foreground", workWatches("1")...)
	tl.zeroNow("test: ManifestWork cluster1/s1-app deleted")
	Expect(k8s.Delete(ctx, a.work)).To(Succeed())
	Eventually(func() bool { return gone(a.work) }).Should(BeTrue())
	Expect(a.onCluster()).To(BeEmpty(), "the work agent left objects of a deleted work")
	tl.before([]string{"ManifestWork", "s1-app deleting"}, []string{"managed ConfigMap", "s1-app-config gone"})
	tl.before([]string{"managed Deployment", "s1-app-web gone"}, []string{"ManifestWork", "s1-app gone"})
}

// Scenario 2: a rule orphans the ConfigMap; the operator writes
// SelectivelyOrphan naming it, and the agent keeps it when the work goes.
func scenarioOrphanConfigMap() {
	joinCluster(map[string]string{scenarioLabel: "2"})
	cleanupPolicy(policyYAML("s2", "2", `
removeStrategy:
  default: Required
orphaning:
- name: keep-config
  when: "manifest.kind == 'ConfigMap'"
`))
	governedBy("s2")
	a := manifestWork("2", "s2-app", nil, nil)
	Eventually(func(g Gomega) {
		opt := workDeleteOption(g, a.work)
		g.Expect(opt).NotTo(BeNil())
		g.Expect(opt.PropagationPolicy).To(Equal(workv1.DeletePropagationPolicyTypeSelectivelyOrphan))
		g.Expect(opt.SelectivelyOrphan).NotTo(BeNil())
		g.Expect(opt.SelectivelyOrphan.OrphaningRules).To(ConsistOf(workv1.OrphaningRule{
			Group: "", Resource: "configmaps", Namespace: workloadNamespace, Name: "s2-app-config",
		}))
	}).Should(Succeed(), "the operator has not stamped the orphaning rule")

	tl := newTimeline("scenario 2: orphan the ConfigMap", workWatches("2")...)
	tl.zeroNow("test: ManifestWork cluster1/s2-app deleted")
	Expect(k8s.Delete(ctx, a.work)).To(Succeed())
	Eventually(func() bool { return gone(a.work) }).Should(BeTrue())
	Eventually(func() bool { return gone(a.deployment) }).Should(BeTrue(), "the Deployment was not orphaned, it must be deleted")
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap"}))
	Expect(ownedByAgent(a.configMap)).To(BeFalse(),
		"the orphaned ConfigMap still has the agent's owner reference: the garbage collector would delete it")
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(a.configMap), a.configMap)).To(Succeed())
	Expect(a.configMap.DeletionTimestamp).To(BeNil())
}

// Scenario 3: a rule orphans the whole work; the operator writes Orphan.
func scenarioOrphanWork() {
	joinCluster(map[string]string{scenarioLabel: "3"})
	cleanupPolicy(policyYAML("s3", "3", `
removeStrategy:
  default: Required
orphaning:
- name: keep-legacy
  when: "work.metadata.labels[?'legacy'].orValue('') == 'true'"
`))
	governedBy("s3")
	a := manifestWork("3", "s3-app", map[string]string{"legacy": "true"}, nil)
	Eventually(func(g Gomega) *workv1.DeleteOption { return workDeleteOption(g, a.work) }).Should(
		HaveField("PropagationPolicy", workv1.DeletePropagationPolicyTypeOrphan),
		"the operator has not stamped Orphan")

	tl := newTimeline("scenario 3: orphan the whole work", workWatches("3")...)
	tl.zeroNow("test: ManifestWork cluster1/s3-app deleted")
	Expect(k8s.Delete(ctx, a.work)).To(Succeed())
	Eventually(func() bool { return gone(a.work) }).Should(BeTrue())
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))
	Expect(ownedByAgent(a.configMap)).To(BeFalse())
	Expect(ownedByAgent(a.deployment)).To(BeFalse())
}
