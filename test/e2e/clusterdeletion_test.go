package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"
)

// namespaceGone waits until the namespace controller has removed cluster1's
// namespace.
func namespaceGone() {
	GinkgoHelper()
	Eventually(func() bool {
		return gone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterName}})
	}).Should(BeTrue(), "the cluster namespace is still there")
}

// hubClean asserts that nothing of cluster1 is left on the hub.
func hubClean() {
	GinkgoHelper()
	clusterGone()
	namespaceGone()
	works := &workv1.ManifestWorkList{}
	Expect(k8s.List(ctx, works, client.InNamespace(clusterName))).To(Succeed())
	Expect(works.Items).To(BeEmpty())
}

// clusterEvents returns the reasons of the Events about the cluster1 the
// scenario joined (not an earlier one of the same name).
func clusterEvents() []string {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list)).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "ManagedCluster" && e.Regarding.UID == joined {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// recordedGroups are the stage groups the teardown record of the cluster1
// the scenario joined lists deleted, in order: step/cleanup-priority.
func recordedGroups() []string {
	list := &corev1.ConfigMapList{}
	Expect(k8s.List(ctx, list, client.InNamespace("cleanup-operator-system"),
		client.MatchingLabels{"cleanup.fleetops.dev/cluster-uid": string(joined)})).To(Succeed())
	Expect(list.Items).To(HaveLen(1))
	var rec struct {
		Entries []struct {
			Step, Action, Priority string
		} `json:"entries"`
	}
	Expect(json.Unmarshal([]byte(list.Items[0].Data["record.json"]), &rec)).To(Succeed())
	var groups []string
	for _, e := range rec.Entries {
		group := e.Step + "/" + e.Priority
		if e.Action == "deleted" && strings.HasPrefix(e.Step, "stage/") && !slices.Contains(groups, group) {
			groups = append(groups, group)
		}
	}
	return groups
}

// Scenario 4: Required, default stages, a deletion signal. A finalizer of
// the test's holds an add-on, and one on the first work's ConfigMap holds
// that work (the agent waits for it), so the order can be checked while it
// is held: no work is touched while an add-on remains, and the second work
// is not touched while the first (lower cleanup-priority) remains.
func scenarioRequired() {
	joinCluster(map[string]string{scenarioLabel: "4"})
	cleanupPolicy(policyYAML("s4", "4", `
removeStrategy:
  default: Required
deletionSignal:
  manifests:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: s4-cluster-alive
      namespace: workloads
      labels:
        e2e.fleetops.dev/scenario: "4"
`))
	governedBy("s4")
	held := addon("s4-held-addon", holdFinalizer)
	addonAsNewest("s4-addon")
	first := manifestWork("4", "s4-first", nil, map[string]string{cleanupPriorityAnnotation: "10"})
	second := manifestWork("4", "s4-second", nil, map[string]string{cleanupPriorityAnnotation: "90"})
	addFinalizer(first.configMap, holdFinalizer)
	signal := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s4-cluster-alive", Namespace: workloadNamespace}}
	Eventually(func() bool { return gone(signal) }).Should(BeFalse(), "the work agent has not applied the signal work")

	tl := newTimeline("scenario 4: cluster deletion under Required", clusterWatches("4")...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()

	By("deleting the add-ons first, and no work while one remains")
	Eventually(func() bool { return deleting(held) }).Should(BeTrue())
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Message).To(ContainSubstring("addons"))
		g.Expect(c.Message).To(ContainSubstring("s4-held-addon"))
	}).Should(Succeed())
	Expect(deleting(first.work)).To(BeFalse(), "a work was deleted while an add-on remained")
	Expect(deleting(second.work)).To(BeFalse(), "a work was deleted while an add-on remained")
	Expect(gone(signal)).To(BeTrue(), "the stages started before the signal was gone")
	tl.mark("test: add-on finalizer removed")
	removeFinalizer(held, holdFinalizer)

	By("deleting the works by cleanup-priority: the second waits while the first remains")
	Eventually(func() bool { return deleting(first.work) }).Should(BeTrue())
	Eventually(func() bool { return deleting(first.configMap) }).Should(BeTrue(), "the agent has not deleted the first work's ConfigMap")
	Eventually(func(g Gomega) {
		g.Expect(contentDelete(g).Message).To(ContainSubstring("s4-first"))
	}).Should(Succeed())
	Expect(deleting(second.work)).To(BeFalse(), "the work with cleanup-priority 90 was deleted before the one with 10 was gone")
	tl.mark("test: finalizer of the first work's ConfigMap removed")
	removeFinalizer(first.configMap, holdFinalizer)

	By("deleting the namespace and letting the cluster go")
	hubClean()
	Expect(first.onCluster()).To(BeEmpty())
	Expect(second.onCluster()).To(BeEmpty())
	Eventually(clusterEvents).Should(ContainElements("Signalling", "Completed"))
	Expect(clusterEvents()).NotTo(ContainElement(BeElementOf("Forced", "CleanupFailed", "DeletingStage", "DeletingNamespace")))
	Expect(recordedGroups()).To(HaveLen(3),
		"the record lists each group deleted: the add-ons, then each cleanup-priority")

	tl.before([]string{"Namespace cluster1 labelled"}, []string{"ManifestWork cluster1/cleanup-signal deleting"})
	tl.before([]string{"ManifestWork cluster1/cleanup-signal gone"}, []string{"ManagedClusterAddOn", "deleting"})
	tl.before([]string{"ManagedClusterAddOn cluster1/s4-held-addon gone"}, []string{"ManifestWork cluster1/s4-first deleting"})
	tl.before([]string{"ManifestWork cluster1/s4-first gone"}, []string{"ManifestWork cluster1/s4-second deleting"})
	tl.before([]string{"ManifestWork cluster1/s4-second gone"}, []string{"Namespace cluster1 deleting"})
	tl.before([]string{"Namespace cluster1 deleting"}, []string{"ManagedCluster cluster1 gone"})
}

// Scenario 5: Needless: every work is orphaned first, then the hub side is
// removed; the managed cluster keeps everything. An add-on held by a
// finalizer of the test keeps the works from being deleted until the agent
// has applied the Orphan stamp (5b is what happens when it has not).
func scenarioNeedless() {
	joinCluster(map[string]string{scenarioLabel: "5"})
	cleanupPolicy(policyYAML("s5", "5", `
removeStrategy:
  default: Needless
`))
	governedBy("s5")
	held := addon("s5-addon", holdFinalizer)
	a := manifestWork("5", "s5-app", nil, nil)
	b := manifestWork("5", "s5-other", nil, nil)

	tl := newTimeline("scenario 5: cluster deletion under Needless", clusterWatches("5")...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	Eventually(func() bool { return deleting(held) }).Should(BeTrue())
	for _, x := range []app{a, b} {
		Eventually(func(g Gomega) *workv1.DeleteOption { return workDeleteOption(g, x.work) }).Should(
			HaveField("PropagationPolicy", workv1.DeletePropagationPolicyTypeOrphan), "work %s", x.work.Name)
		Eventually(func() bool { return ownedByAgent(x.configMap) || ownedByAgent(x.deployment) }).Should(BeFalse(),
			"the agent has not applied the Orphan stamp of %s", x.work.Name)
		Expect(deleting(x.work)).To(BeFalse(), "a work was deleted while an add-on remained")
	}
	tl.mark("test: add-on finalizer removed")
	removeFinalizer(held, holdFinalizer)
	hubClean()
	for _, x := range []app{a, b} {
		Expect(x.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}), "work %s", x.work.Name)
		Expect(ownedByAgent(x.configMap)).To(BeFalse())
		Expect(ownedByAgent(x.deployment)).To(BeFalse())
	}
	Eventually(clusterEvents).Should(ContainElement("Orphaned"))
	tl.before([]string{"ManifestWork cluster1/s5-app deleteOption Orphan"}, []string{"ManifestWork cluster1/s5-app deleting"})
	tl.before([]string{"ManifestWork cluster1/s5-other deleteOption Orphan"}, []string{"ManifestWork cluster1/s5-other deleting"})
}

// Scenario 5b: Needless while the work agent is away for a moment (a
// restart). The agent honours a work's deleteOption only when it applies the
// work; a work already being deleted is not applied again (OCM v1.0.0,
// pkg/work/spoke/controllers/manifestcontroller/manifestwork_controller.go),
// and its objects still owned by the agent are deleted. So the works must
// not be deleted before the agent has applied the Orphan stamp.
func scenarioNeedlessAgentRestart() {
	joinCluster(map[string]string{scenarioLabel: "5b"})
	cleanupPolicy(policyYAML("s5b", "5b", `
removeStrategy:
  default: Needless
  timeout: 1h
`))
	governedBy("s5b")
	a := manifestWork("5b", "s5b-app", nil, nil)

	tl := newTimeline("scenario 5b: Needless while the work agent restarts", clusterWatches("5b")...)
	tl.mark("test: work agent stopped (lease still renewed)")
	agent.stopWork()
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	Eventually(func(g Gomega) *workv1.DeleteOption { return workDeleteOption(g, a.work) }).Should(
		HaveField("PropagationPolicy", workv1.DeletePropagationPolicyTypeOrphan))
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Reason).To(Equal("Orphaning"))
		g.Expect(c.Message).To(ContainSubstring("manifestworks/s5b-app"))
	}).Should(Succeed())
	Expect(deleting(a.work)).To(BeFalse(), "the work was deleted before the agent applied its Orphan")
	tl.mark("test: work agent started again")
	agent.start()
	hubClean()
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}), "Needless deleted what the agent had applied")
	tl.before([]string{"test: work agent started again"}, []string{"ManifestWork cluster1/s5b-app deleting"})
}

// Scenario 6: the deletion signal. An in-cluster controller put a finalizer
// on the signal object; nothing else is touched until it removes it.
func scenarioSignal() {
	joinCluster(map[string]string{scenarioLabel: "6"})
	cleanupPolicy(policyYAML("s6", "6", `
removeStrategy:
  default: Required
deletionSignal:
  workName: alive
  manifests:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: s6-cluster-alive
      namespace: workloads
      labels:
        e2e.fleetops.dev/scenario: "6"
`))
	governedBy("s6")
	a := manifestWork("6", "s6-app", nil, nil)
	signal := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s6-cluster-alive", Namespace: workloadNamespace}}
	Eventually(func() bool { return gone(signal) }).Should(BeFalse(), "the work agent has not applied the signal work")
	addFinalizer(signal, holdFinalizer)

	tl := newTimeline("scenario 6: the deletion signal", clusterWatches("6")...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	Eventually(func() bool { return deleting(signal) }).Should(BeTrue(),
		"the signal object on the managed cluster is not being deleted")
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Reason).To(Equal("Signalling"))
		g.Expect(c.Message).To(ContainSubstring("alive"))
	}).Should(Succeed())
	ns := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: clusterName}, ns)).To(Succeed())
	Expect(ns.Labels).To(HaveKeyWithValue(clusterDeletingLabel, "true"))
	Expect(deleting(a.work)).To(BeFalse(), "a work was deleted while the signal was held")
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))

	By("refusing a new ManifestWork in the namespace while the cleanup runs")
	late := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "s6-late", Namespace: clusterName},
		Spec:       workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: a.work.Spec.Workload.Manifests}},
	}
	Expect(k8s.Create(ctx, late)).To(MatchError(ContainSubstring("cluster cluster1 is being deleted")))

	tl.mark("test: in-cluster controller removes its finalizer from the signal object")
	removeFinalizer(signal, holdFinalizer)
	hubClean()
	Expect(gone(signal)).To(BeTrue())
	Expect(a.onCluster()).To(BeEmpty())
	tl.before([]string{"managed ConfigMap workloads/s6-cluster-alive gone"}, []string{"ManifestWork cluster1/s6-app deleting"})
}

// Scenario 6b: when no policy governs a cluster any more, its signal work is
// retired orphaned: the signal object must stay on the managed cluster, or
// in-cluster controllers would see a deletion signal for a cluster that is
// not being deleted. As in 5b, the stamp must be applied by the agent before
// the work is deleted.
func scenarioSignalRetired() {
	joinCluster(map[string]string{scenarioLabel: "6b"})
	p := cleanupPolicy(policyYAML("s6b", "6b", `
removeStrategy:
  default: Required
deletionSignal:
  manifests:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: s6b-cluster-alive
      namespace: workloads
      labels:
        e2e.fleetops.dev/scenario: "6b"
`))
	governedBy("s6b")
	signal := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s6b-cluster-alive", Namespace: workloadNamespace}}
	Eventually(func() bool { return gone(signal) }).Should(BeFalse(), "the work agent has not applied the signal work")

	tl := newTimeline("scenario 6b: a released cluster keeps its signal object", clusterWatches("6b")...)
	tl.zeroNow("test: CleanupPolicy s6b deleted")
	Expect(k8s.Delete(ctx, p)).To(Succeed())
	Eventually(func(g Gomega) {
		works := &workv1.ManifestWorkList{}
		g.Expect(k8s.List(ctx, works, client.InNamespace(clusterName))).To(Succeed())
		g.Expect(works.Items).To(BeEmpty())
	}).Should(Succeed(), "the signal work was not retired")
	Expect(gone(signal)).To(BeFalse(), "retiring the signal work deleted the signal object: a false deletion signal")
}

// Scenario 7: a Backup (the test's own CRD) in the cluster namespace holds
// the cleanup until someone deletes it; the operator never deletes it.
func scenarioMonitored() {
	joinCluster(map[string]string{scenarioLabel: "7"})
	cleanupPolicy(policyYAML("s7", "7", `
removeStrategy:
  default: Required
monitoredResources:
- group: e2e.fleetops.dev
  version: v1
  resource: backups
`))
	governedBy("s7")
	addon("s7-addon")
	a := manifestWork("7", "s7-app", nil, nil)
	backup := &unstructured.Unstructured{}
	backup.SetAPIVersion(backupGroup + "/v1")
	backup.SetKind("Backup")
	backup.SetNamespace(clusterName)
	backup.SetName("nightly")
	Expect(k8s.Create(ctx, backup)).To(Succeed())

	watches := append(clusterWatches("7"), watched{kind: "Backup", gvr: backupGVR, namespace: clusterName})
	tl := newTimeline("scenario 7: a monitored resource", watches...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Reason).To(Equal("WaitingForMonitoredResources"))
		g.Expect(c.Message).To(ContainSubstring("nightly"))
	}).Should(Succeed())
	Expect(deleting(backup)).To(BeFalse(), "the operator deleted a monitored resource")
	Expect(deleting(a.work)).To(BeFalse(), "a work was deleted while a monitored resource remained")
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))

	Eventually(clusterEvents).Should(ContainElement("WaitingForMonitoredResources"))
	tl.mark("test: Backup cluster1/nightly deleted")
	Expect(k8s.Delete(ctx, backup)).To(Succeed())
	hubClean()
	Expect(a.onCluster()).To(BeEmpty())
	tl.before([]string{"Backup cluster1/nightly gone"}, []string{"ManifestWork cluster1/s7-app deleting"})
}

// Scenario 8a: Required with the agent gone: the work keeps the agent's
// finalizer; past the timeout the condition names it; the cluster stays
// until the agent is back and removes the work's objects.
func scenarioRequiredAgentDown() {
	joinCluster(map[string]string{scenarioLabel: "8a"})
	cleanupPolicy(policyYAML("s8a", "8a", `
removeStrategy:
  default: Required
  timeout: 5s
`))
	governedBy("s8a")
	a := manifestWork("8a", "s8a-app", nil, nil)

	tl := newTimeline("scenario 8a: Required, agent stopped, cluster unavailable", clusterWatches("8a")...)
	tl.mark("test: work agent and lease renewal stopped")
	agent.stop()
	Eventually(clusterAvailable).Should(Equal(metav1.ConditionUnknown), "OCM's lease controller has not marked cluster1 unavailable")
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Reason).To(Equal("CleanupFailed"))
		g.Expect(c.Message).To(ContainSubstring("s8a-app"))
	}).Should(Succeed(), "Required does not report what remains after its timeout")
	Expect(deleting(a.work)).To(BeTrue())
	Expect(gone(a.work)).To(BeFalse(), "Required removed the agent's finalizer")
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))

	Eventually(clusterEvents).Should(ContainElement("CleanupFailed"))

	By("refusing to orphan the deleting work by hand")
	orphan := []byte(`{"spec":{"deleteOption":{"propagationPolicy":"Orphan"}}}`)
	Expect(k8s.Patch(ctx, a.work, client.RawPatch(types.MergePatchType, orphan))).To(
		MatchError(ContainSubstring("its spec.deleteOption can no longer change")))

	tl.mark("test: work agent and lease renewal started again")
	agent.start()
	agent.startHeartbeat()
	hubClean()
	Expect(a.onCluster()).To(BeEmpty())
	Expect(clusterEvents()).NotTo(ContainElement("Forced"))
}

// Scenario 8b: BestEffort with the agent stopped but the cluster still
// reported Available: it waits for the timeout, then removes the agent's
// finalizer so the hub is clean. The managed cluster keeps what the stopped
// agent could not delete.
func scenarioBestEffortTimeout() {
	joinCluster(map[string]string{scenarioLabel: "8b"})
	cleanupPolicy(policyYAML("s8b", "8b", `
removeStrategy:
  default: BestEffort
  timeout: 8s
`))
	governedBy("s8b")
	a := manifestWork("8b", "s8b-app", nil, nil)

	tl := newTimeline("scenario 8b: BestEffort, agent stopped, cluster still Available", clusterWatches("8b")...)
	tl.mark("test: work agent stopped (lease still renewed)")
	agent.stopWork()
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	Eventually(func(g Gomega) {
		g.Expect(contentDelete(g).Message).To(ContainSubstring("s8b-app"))
	}).Should(Succeed())
	hubClean()
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))
	Eventually(clusterEvents).Should(ContainElement("Forced"))
	tl.before([]string{"ContentDeleteSuccess=False"}, []string{"ContentDeleteSuccess=True Forced"})
	// The timeout runs from the cluster's deletionTimestamp, which the API
	// server keeps to the second: the deadline may come up to a second
	// before 8 s after the test's delete call.
	Expect(tl.since("ContentDeleteSuccess=True Forced")).To(BeNumerically(">=", 7*time.Second),
		"BestEffort forced before its timeout though the cluster is Available")
}

// Scenario 8c: BestEffort with the cluster unavailable forces at once, long
// before its timeout, the deletion-signal work included.
func scenarioBestEffortUnavailable() {
	joinCluster(map[string]string{scenarioLabel: "8c"})
	cleanupPolicy(policyYAML("s8c", "8c", `
removeStrategy:
  default: BestEffort
  timeout: 1h
deletionSignal:
  manifests:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: s8c-cluster-alive
      namespace: workloads
      labels:
        e2e.fleetops.dev/scenario: "8c"
`))
	governedBy("s8c")
	addon("s8c-addon")
	a := manifestWork("8c", "s8c-app", nil, nil)
	signal := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s8c-cluster-alive", Namespace: workloadNamespace}}
	Eventually(func() bool { return gone(signal) }).Should(BeFalse(), "the work agent has not applied the signal work")

	tl := newTimeline("scenario 8c: BestEffort, cluster unavailable", clusterWatches("8c")...)
	tl.mark("test: work agent and lease renewal stopped")
	agent.stop()
	Eventually(clusterAvailable).Should(Equal(metav1.ConditionUnknown), "OCM's lease controller has not marked cluster1 unavailable")
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()
	hubClean()
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))
	Expect(gone(signal)).To(BeFalse(), "the signal object went though the agent was stopped")
	Eventually(clusterEvents).Should(ContainElement("Forced"))
	tl.before([]string{"ManifestWork cluster1/cleanup-signal gone"}, []string{"ManifestWork cluster1/s8c-app deleting"})
}
