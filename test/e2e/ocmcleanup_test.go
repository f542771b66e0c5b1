package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// ungovernedCluster is a cluster no policy selects: OCM's gc cleans it up
// alone. It has no agent: its works are deleted at once.
const ungovernedCluster = "cluster2"

// finalizerToGone bounds the time from the operator's finalizer removal,
// its last write of a teardown, to the cluster's disappearance: OCM's gc
// syncs on that event, not after its backoff (5 s between its own groups,
// and growing after each refused delete).
const finalizerToGone = 4 * time.Second

// Scenario 7b: OCM's gc on, as OCM ships. cluster1 is governed by a policy
// whose monitored Backup is still in the cluster namespace: OCM's gc is
// refused every delete there (its Deleting condition names the policy), and
// every add-on and work stays until the Backup goes. Meanwhile cluster2, which
// no policy governs, is deleted: OCM's gc deletes its add-on and works in its
// order and lets it go, as without the operator. Once the Backup is deleted
// the policy's teardown deletes cluster1's add-on and works in its order,
// all by the operator (the audit log); then OCM's gc, syncing on the
// operator's finalizer removal, finds nothing left, removes its own finalizer
// and the cluster goes within seconds.
func scenarioOCMHeld() {
	Expect(hubResourceCleanup).To(BeTrue(), "scenario 7b needs OCM's gc: the ResourceCleanup gate on")
	since := time.Now()
	joinCluster(map[string]string{scenarioLabel: "7b"})
	cleanupPolicy(policyYAML("s7b", "7b", `
removeStrategy:
  default: Required
monitoredResources:
- group: e2e.fleetops.dev
  version: v1
  resource: backups
`))
	governedBy("s7b")
	held := addon("s7b-addon")
	first := manifestWork("7b", "s7b-first", nil, map[string]string{cleanupPriorityAnnotation: "10"})
	second := manifestWork("7b", "s7b-second", nil, map[string]string{cleanupPriorityAnnotation: "90"})
	backup := createBackup(clusterName, "nightly")

	By("joining cluster2, which no policy selects, with an add-on and two works")
	joinUngoverned(ungovernedCluster, map[string]string{scenarioLabel: "7b-ungoverned"})
	addonIn(ungovernedCluster, "c2-addon")
	workIn(ungovernedCluster, "c2-first", "10")
	workIn(ungovernedCluster, "c2-second", "90")

	watches := append(clusterWatches("7b"),
		watched{kind: "Backup", gvr: backupGVR, namespace: clusterName},
		watched{kind: "ManagedCluster", gvr: managedClusterGVR, selector: "metadata.name=" + ungovernedCluster, facts: clusterFacts},
		watched{kind: "ManagedClusterAddOn", gvr: addonGVR, namespace: ungovernedCluster},
		watched{kind: "ManifestWork", gvr: manifestWorkGVR, namespace: ungovernedCluster},
	)
	tl := newTimeline("scenario 7b: OCM's gc held on a governed cluster, free on another", watches...)
	tl.zeroNow("test: ManagedCluster cluster1 deleted")
	deleteCluster()

	By("refusing OCM's gc on cluster1: its Deleting condition names the admission policy and the CleanupPolicy")
	Eventually(func(g Gomega) {
		c := ocmDeleting(g, clusterName)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring(ocmHoldPolicy))
		g.Expect(c.Message).To(ContainSubstring("CleanupPolicy s7b"))
	}).Should(Succeed(), "OCM's gc was not refused on cluster1, or its Deleting condition does not say why")
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Reason).To(Equal("WaitingForMonitoredResources"))
		g.Expect(c.Message).To(ContainSubstring("nightly"))
	}).Should(Succeed())

	By("deleting cluster2: OCM's gc deletes its add-on, then its works by cleanup-priority, and lets it go")
	tl.mark("test: ManagedCluster cluster2 deleted")
	Expect(k8s.Delete(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: ungovernedCluster}})).To(Succeed())
	Eventually(func() bool {
		return gone(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: ungovernedCluster}})
	}).Should(BeTrue(), "OCM's gc did not clean up cluster2 and let it go:\n%s", tl)
	events := auditSince(since)
	c2 := deletesIn(events, ungovernedCluster)
	Expect(objects(by(c2, registrationHubUserName, true))).To(Equal([]string{"managedclusteraddons/c2-addon", "manifestworks/c2-first", "manifestworks/c2-second"}),
		"cluster2's add-on and works were not deleted once each in OCM's order:\n%s", auditTrail(c2))
	Expect(by(c2, registrationHubUserName, true)).To(Equal(c2), "not only OCM's gc deleted in cluster2:\n%s", auditTrail(c2))
	c2Writes := clusterWrites(events, ungovernedCluster)
	Expect(by(c2Writes, operatorUser, true)).To(BeEmpty(), "the operator wrote cluster2, which no policy governs:\n%s", auditTrail(c2Writes))
	Expect(c2Writes).NotTo(BeEmpty())
	Expect(c2Writes[len(c2Writes)-1].User.Username).To(Equal(registrationHubUserName),
		"OCM did not remove its finalizer from cluster2:\n%s", auditTrail(c2Writes))

	By("keeping every add-on and work of cluster1 meanwhile: the Backup is still there")
	Expect(deleting(held)).To(BeFalse(), "an add-on of cluster1 was deleted while the Backup remained")
	Expect(deleting(first.work)).To(BeFalse(), "a work of cluster1 was deleted while the Backup remained")
	Expect(deleting(second.work)).To(BeFalse(), "a work of cluster1 was deleted while the Backup remained")
	Expect(deleting(backup)).To(BeFalse(), "the Backup, a monitored resource, was deleted")
	Expect(first.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))
	Expect(second.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))
	c1 := deletesIn(auditSince(since), clusterName)
	Expect(by(c1, registrationHubUserName, false)).NotTo(BeEmpty(), "no refused delete of OCM's gc in cluster1:\n%s", auditTrail(c1))
	for _, e := range c1 {
		Expect(e.succeeded()).To(BeFalse(), "%s deleted in cluster1 while the Backup remained:\n%s", e.object(), auditTrail(c1))
	}

	By("deleting the Backup: the policy's teardown runs in its order")
	tl.mark("test: Backup cluster1/nightly deleted")
	Expect(k8s.Delete(ctx, backup)).To(Succeed())

	By("letting cluster1 go within seconds of the operator's finalizer removal")
	Eventually(func(g Gomega) {
		mc := &clusterv1.ManagedCluster{}
		err := k8s.Get(ctx, client.ObjectKey{Name: clusterName}, mc)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mc.Finalizers).NotTo(ContainElement(clusterCleanupFinalizer))
	}).WithPolling(20*time.Millisecond).Should(Succeed(), "the teardown did not end:\n%s", tl)
	observed := time.Now()
	Eventually(func() bool {
		return gone(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName}})
	}).WithTimeout(finalizerToGone).WithPolling(20*time.Millisecond).Should(BeTrue(),
		"cluster1 was still there %s after the operator removed its finalizer: OCM's gc did not sync on it:\n%s", finalizerToGone, tl)
	polled := time.Since(observed)
	hubClean()
	Expect(first.onCluster()).To(BeEmpty())
	Expect(second.onCluster()).To(BeEmpty())

	By("the teardown's deletes, all the operator's, in the policy's order; OCM's gc deleted nothing of cluster1")
	events = auditSince(since)
	c1 = deletesIn(events, clusterName)
	var done []auditEvent
	for _, e := range c1 {
		if e.succeeded() {
			done = append(done, e)
		}
	}
	Expect(by(done, operatorUser, true)).To(Equal(done), "someone but the operator deleted in cluster1:\n%s", auditTrail(c1))
	Expect(objects(done)).To(Equal([]string{"managedclusteraddons/s7b-addon", "manifestworks/s7b-first", "manifestworks/s7b-second"}),
		"not the policy's order:\n%s", auditTrail(c1))
	Expect(recordedGroups()).To(HaveLen(3), "the record lists each group deleted: the add-on, then each cleanup-priority")
	tl.before([]string{"Backup cluster1/nightly gone"}, []string{"ManagedClusterAddOn cluster1/s7b-addon gone"})
	tl.before([]string{"ManagedClusterAddOn cluster1/s7b-addon gone"}, []string{"ManifestWork cluster1/s7b-first deleting"})
	tl.before([]string{"ManifestWork cluster1/s7b-first gone"}, []string{"ManifestWork cluster1/s7b-second deleting"})
	tl.before([]string{"ManifestWork cluster1/s7b-second gone"}, []string{"Namespace cluster1 deleting"})

	By("OCM's finalizer, still there when the operator's went, removed by OCM")
	writes := clusterWrites(events, clusterName)
	Expect(writes).NotTo(BeEmpty())
	Expect(writes[len(writes)-1].User.Username).To(Equal(registrationHubUserName),
		"the last write of cluster1 (its last finalizer removed) is not OCM's:\n%s", auditTrail(writes))
	released := tl.first(func(what string) bool {
		return strings.HasPrefix(what, "ManagedCluster cluster1 finalizers [") && !strings.Contains(what, clusterCleanupFinalizer)
	})
	Expect(released).NotTo(BeNil(), "the watch did not see the operator's finalizer go before the cluster:\n%s", tl)
	var goneAt *entry
	Eventually(func() *entry {
		goneAt = tl.first(func(what string) bool { return what == "ManagedCluster cluster1 gone" })
		return goneAt
	}).ShouldNot(BeNil(), "the watch did not see cluster1 go:\n%s", tl)
	Expect(released.what).To(ContainSubstring(ocmCleanupFinalizer), "OCM's finalizer went before the operator's:\n%s", tl)
	gap := goneAt.at.Sub(released.at)
	report := fmt.Sprintf("operator's finalizer removed -> cluster1 gone: %s (watch), %s (polled)", gap.Round(time.Millisecond), polled.Round(time.Millisecond))
	fmt.Fprintln(GinkgoWriter, report)
	AddReportEntry("finalizer-to-gone", report, ReportEntryVisibilityAlways)
	Expect(gap).To(BeNumerically("<", finalizerToGone), report)

	Eventually(clusterEvents).Should(ContainElement("Completed"))
	Expect(clusterEvents()).NotTo(ContainElement(BeElementOf("DeletedOutOfOrder", "Forced", "CleanupFailed")))
}

// scenarioRequiredGateOff is scenario 4 on a hub whose ResourceCleanup gate
// is off: the operator alone tears the cluster down, and the cluster goes.
// OCM's gc, not running, puts no finalizer on the cluster and deletes
// nothing.
func scenarioRequiredGateOff() {
	Expect(hubResourceCleanup).To(BeFalse())
	since := time.Now()
	scenarioRequired()
	d := deletesIn(auditSince(since), clusterName)
	Expect(by(d, registrationHubUserName, true)).To(BeEmpty(), "OCM's gc deleted with its gate off:\n%s", auditTrail(d))
	Expect(by(d, registrationHubUserName, false)).To(BeEmpty(), "OCM's gc tried to delete with its gate off:\n%s", auditTrail(d))
}

// ocmDeleting returns a cluster's Deleting condition, OCM's gc's.
func ocmDeleting(g Gomega, name string) *metav1.Condition {
	mc := &clusterv1.ManagedCluster{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, mc)).To(Succeed())
	c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionDeleting)
	g.Expect(c).NotTo(BeNil(), "no Deleting condition on %s yet", name)
	return c
}

// createBackup creates a Backup, the test's own monitored resource.
func createBackup(namespace, name string) *unstructured.Unstructured {
	GinkgoHelper()
	backup := &unstructured.Unstructured{}
	backup.SetAPIVersion(backupGroup + "/v1")
	backup.SetKind("Backup")
	backup.SetNamespace(namespace)
	backup.SetName(name)
	Expect(k8s.Create(ctx, backup)).To(Succeed())
	return backup
}

// joinUngoverned makes a cluster no policy selects: accepted by the hub,
// which makes its namespace, and carrying OCM's gc finalizer, with no
// agent. What a failed scenario leaves of it goes after it.
func joinUngoverned(name string, labels map[string]string) {
	GinkgoHelper()
	mc := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true, LeaseDurationSeconds: 60},
	}
	Expect(k8s.Create(ctx, mc)).To(Succeed())
	DeferCleanup(func() {
		removeGone(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}})
		removeGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
		g.Expect(ns.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabelKey, name))
		g.Expect(ns.Labels).NotTo(HaveKey(governedLabel), "the namespace of %s, which no policy governs, is marked", name)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		g.Expect(mc.Finalizers).To(ContainElement(ocmCleanupFinalizer), "OCM's gc has not put its finalizer on %s", name)
		g.Expect(mc.Finalizers).NotTo(ContainElement(clusterCleanupFinalizer), "the operator governs %s", name)
	}).Should(Succeed(), "the hub has not taken %s in", name)
}

// addonIn creates an add-on in a cluster namespace.
func addonIn(namespace, name string) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: namespace,
	}})).To(Succeed())
}

// workIn creates a ManifestWork of one ConfigMap with a cleanup-priority in
// the namespace of a cluster without an agent: nothing applies it.
func workIn(namespace, name, priority string) {
	GinkgoHelper()
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: workloadNamespace},
	}
	Expect(k8s.Create(ctx, &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Annotations: map[string]string{cleanupPriorityAnnotation: priority}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: mustJSON(cm)}},
		}}},
	})).To(Succeed())
}
