package controller_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// records reads the teardown records of a cluster, the newest first.
func records(g Gomega, cluster string) []record.Record {
	rs, err := record.List(ctx, k8s, record.DefaultNamespace, cluster)
	g.Expect(err).NotTo(HaveOccurred())
	return rs
}

// endedRecord waits for the one real (not dry-run) record of the cluster
// to end, and returns it.
func endedRecord(cluster string) record.Record {
	var out record.Record
	Eventually(func(g Gomega) {
		var real []record.Record
		for _, r := range records(g, cluster) {
			if !r.DryRun {
				real = append(real, r)
			}
		}
		g.Expect(real).To(HaveLen(1))
		g.Expect(real[0].End).NotTo(BeNil(), "the record has not ended")
		out = real[0]
	}).Should(Succeed())
	return out
}

// labelNamespace puts the operator's deleting label on the cluster's
// namespace, written by the field manager owner.
func labelNamespace(cluster, owner string) {
	ns := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: cluster}, ns)).To(Succeed())
	before := ns.DeepCopy()
	ns.Labels[v1alpha1.ClusterDeletingLabel] = "true"
	Expect(k8s.Patch(ctx, ns, client.MergeFrom(before), client.FieldOwner(owner))).To(Succeed())
}

// entryKeys names entries as resource/namespace/name action state.
func entryKeys(es []record.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s %s/%s %s %s", e.Step, e.Resource, e.Name, e.Action, e.State)
	}
	return out
}

var _ = Describe("Teardown record", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	// OCM cluster deletion, story 1: the add-ons go, then the works, then
	// the namespace.
	It("lists each object the teardown deleted, once, in order, and how the teardown ended", func() {
		fleetCluster("rec-1", nil, true)
		addon("rec-1", "search")
		addon("rec-1", "policy")
		priority := func(p string) map[string]string {
			return map[string]string{"open-cluster-management.io/cleanup-priority": p}
		}
		work("rec-1", "late", priority("90"))
		work("rec-1", "early", priority("10"))
		Expect(k8s.Create(ctx, cleanupPolicy("rec", v1alpha1.CleanupPolicySpec{
			DeletionSignal: &v1alpha1.DeletionSignal{WorkName: "alive"},
		}))).To(Succeed())
		governedBy("rec-1", "rec")
		Eventually(objectGone("ManifestWork", "rec-1", "alive")).Should(BeFalse())
		before := time.Now()

		deleteCluster("rec-1")
		clusterGone("rec-1")
		r := endedRecord("rec-1")
		Expect(r.Name).To(HavePrefix("teardown-rec-1-"))
		Expect(r.Policy).To(Equal("rec"))
		Expect(r.PolicyGeneration).To(Equal(int64(1)))
		Expect(r.Strategy).To(Equal("Required"))
		Expect(r.Outcome).To(Equal(v1alpha1.CompletedReason))
		Expect(r.Resumed).To(BeFalse())
		Expect(r.Start.Time).To(BeTemporally(">=", before.Add(-time.Second)))
		Expect(r.End.Time).To(BeTemporally(">=", r.Start.Time))
		Expect(r.Signal).To(Equal(&record.Signal{Work: "alive", Outcome: record.SignalRemoved}))
		Expect(r.Holds).To(BeEmpty())
		Expect(entryKeys(r.Entries)).To(Equal([]string{
			"signal namespaces/rec-1 labelled done",
			"signal manifestworks.work.open-cluster-management.io/alive deleted done",
			"stage/addons managedclusteraddons.addon.open-cluster-management.io/policy deleted done",
			"stage/addons managedclusteraddons.addon.open-cluster-management.io/search deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/late deleted done",
			"namespace namespaces/rec-1 deleted done",
		}))
		for _, e := range r.Entries {
			Expect(e.UID).NotTo(BeEmpty(), "%s/%s", e.Resource, e.Name)
			Expect(e.Time.Time).To(BeTemporally(">=", r.Start.Time.Add(-time.Second)))
		}
		// Labelled by cluster and UID.
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: record.DefaultNamespace, Name: r.Name}, cm)).To(Succeed())
		Expect(cm.Labels).To(HaveKeyWithValue(record.ClusterLabel, "rec-1"))
		Expect(cm.Labels).To(HaveKeyWithValue(record.ClusterUIDLabel, string(r.UID)))
		Expect(cm.Labels).To(HaveKeyWithValue(v1alpha1.ManagedByLabel, v1alpha1.ManagedBy))
		Eventually(func(g Gomega) bool { return namespaceDeleting(g, "rec-1") }).Should(BeTrue())

		// The outcome is an Event (recorded asynchronously); the deletes are not.
		Eventually(func(g Gomega) {
			g.Expect(strings.Join(events("rec-1"), "\n")).To(ContainSubstring(v1alpha1.CompletedReason))
		}).Should(Succeed())
		reasons := strings.Join(events("rec-1"), "\n")
		Expect(reasons).NotTo(ContainSubstring(v1alpha1.DeletingStageReason))
		Expect(reasons).NotTo(ContainSubstring(v1alpha1.DeletingNamespaceReason))
	})

	It("lists a namespace the policy keeps as kept", func() {
		fleetCluster("rec-keep", nil, true)
		work("rec-keep", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-keep", v1alpha1.CleanupPolicySpec{KeepNamespace: "true"}))).To(Succeed())
		governedBy("rec-keep", "rec-keep")

		deleteCluster("rec-keep")
		clusterGone("rec-keep")
		r := endedRecord("rec-keep")
		Expect(entryKeys(r.Entries)).To(ContainElements(
			"stage/manifestworks manifestworks.work.open-cluster-management.io/app deleted done",
			"namespace namespaces/rec-keep kept done",
		))
		Expect(r.Signal).To(Equal(&record.Signal{Outcome: record.SignalNone}))
	})

	It("holds the teardown, deleting nothing, while its record cannot be written", func() {
		fleetCluster("rec-clash", nil, true)
		work("rec-clash", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-clash", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("rec-clash", "rec-clash")
		// A ConfigMap of the record's name that is not the operator's.
		mc := getClusterNow("rec-clash")
		clash := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: record.DefaultNamespace,
			Name: record.Name("rec-clash", mc.GetUID(), false)}, Data: map[string]string{"someone": "else's"}}
		Expect(k8s.Create(ctx, clash)).To(Succeed())

		deleteCluster("rec-clash")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "rec-clash")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("teardown record"))
			g.Expect(c.Message).To(ContainSubstring("is not a teardown record of the operator's"))
		}).Should(Succeed())
		// Reported as an Event too, naming the ConfigMap that holds the name:
		// the recorder sends it apart from the condition's write.
		Eventually(func() []string { return events("rec-clash") }).Should(ContainElement(ContainSubstring("ConfigMap " +
			record.DefaultNamespace + "/" + clash.Name + " is not a teardown record of the operator's")))
		Consistently(objectGone("ManifestWork", "rec-clash", "app"), "2s").Should(BeFalse())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(clash), clash)).To(Succeed())
		Expect(clash.Data).To(Equal(map[string]string{"someone": "else's"}))

		Expect(k8s.Delete(ctx, clash)).To(Succeed())
		clusterGone("rec-clash")
		r := endedRecord("rec-clash")
		Expect(entryKeys(r.Entries)).To(ContainElement("stage/manifestworks manifestworks.work.open-cluster-management.io/app deleted done"))
	})

	It("records a hold and how long it lasted", func() {
		fleetCluster("rec-hold", nil, true)
		work("rec-hold", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-hold", v1alpha1.CleanupPolicySpec{
			MonitoredResources: monitors("example.com", "v1", "widgets"),
		}))).To(Succeed())
		governedBy("rec-hold", "rec-hold")

		deleteCluster("rec-hold")
		Eventually(func(g Gomega) {
			rs := records(g, "rec-hold")
			g.Expect(rs).To(HaveLen(1))
			g.Expect(rs[0].Holds).To(HaveLen(1))
			g.Expect(rs[0].Holds[0].Reason).To(ContainSubstring("widgets"))
			g.Expect(rs[0].Holds[0].End).To(BeNil())
		}).Should(Succeed())
		Consistently(objectGone("ManifestWork", "rec-hold", "app"), "1s").Should(BeFalse())

		// The hold ends when the policy no longer names the resource.
		p := &v1alpha1.CleanupPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "rec-hold"}, p)).To(Succeed())
		before := p.DeepCopy() // a merge patch: the operator writes the policy's status meanwhile
		p.Spec.MonitoredResources = nil
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		clusterGone("rec-hold")
		r := endedRecord("rec-hold")
		Expect(r.Holds).To(HaveLen(1))
		Expect(r.Holds[0].End).NotTo(BeNil())
		Expect(r.Holds[0].End.Time).To(BeTemporally(">=", r.Holds[0].Start.Time))
		Expect(r.PolicyGeneration).To(Equal(int64(2)))
		Expect(r.Decisions).To(HaveLen(2))
		Expect(entryKeys(r.Entries)).To(ContainElement("stage/manifestworks manifestworks.work.open-cluster-management.io/app deleted done"))
	})

	It("writes a dry run's record of what would happen, once per change of plan", func() {
		fleetCluster("rec-dry", nil, true)
		work("rec-dry", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-dry", v1alpha1.CleanupPolicySpec{DryRun: true}))).To(Succeed())
		governedBy("rec-dry", "rec-dry")

		deleteCluster("rec-dry")
		var rv string
		Eventually(func(g Gomega) {
			rs := records(g, "rec-dry")
			g.Expect(rs).To(HaveLen(1))
			g.Expect(rs[0].DryRun).To(BeTrue())
			g.Expect(rs[0].Name).To(HaveSuffix("-dryrun"))
			g.Expect(entryKeys(rs[0].Entries)).To(ConsistOf(
				"signal namespaces/rec-dry labelled would",
				"stage/manifestworks manifestworks.work.open-cluster-management.io/app deleted would",
				"namespace namespaces/rec-dry deleted would",
			))
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: record.DefaultNamespace, Name: rs[0].Name}, cm)).To(Succeed())
			g.Expect(cm.Labels).To(HaveKeyWithValue(record.DryRunLabel, "true"))
			rv = cm.ResourceVersion
		}).Should(Succeed())
		Expect(objectGone("ManifestWork", "rec-dry", "app")()).To(BeFalse())

		// Reconciles that plan the same teardown write nothing.
		mc := getClusterNow("rec-dry")
		before := mc.DeepCopy()
		labels := mc.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["poke"] = "1"
		mc.SetLabels(labels)
		// A merge patch: the operator writes the cluster's condition meanwhile.
		Expect(k8s.Patch(ctx, mc, client.MergeFrom(before))).To(Succeed())
		Consistently(func(g Gomega) string {
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: record.DefaultNamespace, Name: record.Name("rec-dry", mc.GetUID(), true)}, cm)).To(Succeed())
			return cm.ResourceVersion
		}, "2s").Should(Equal(rv))

		// A new plan is a new record.
		work("rec-dry", "more", nil)
		Eventually(func(g Gomega) {
			rs := records(g, "rec-dry")
			g.Expect(rs).To(HaveLen(1))
			g.Expect(entryKeys(rs[0].Entries)).To(ContainElement("stage/manifestworks manifestworks.work.open-cluster-management.io/more deleted would"))
		}).Should(Succeed())
	})

	// recordHolds waits until the cluster's record lists the object as the
	// given action, whatever its state.
	recordLists := func(cluster, key string) {
		Eventually(func(g Gomega) {
			rs := records(g, cluster)
			g.Expect(rs).To(HaveLen(1))
			var keys []string
			for _, k := range entryKeys(rs[0].Entries) {
				keys = append(keys, k[:strings.LastIndex(k, " ")])
			}
			g.Expect(keys).To(ContainElement(key))
		}).Should(Succeed())
	}

	It("goes on when someone else changes its record meanwhile, and keeps their change", func() {
		fleetCluster("rec-touch", nil, true)
		priority := func(p string) map[string]string {
			return map[string]string{"open-cluster-management.io/cleanup-priority": p}
		}
		work("rec-touch", "early", priority("10"))
		work("rec-touch", "late", priority("90"))
		agent.setStuck("rec-touch", "early", true)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-touch", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("rec-touch", "rec-touch")
		mc := getClusterNow("rec-touch")

		deleteCluster("rec-touch")
		recordLists("rec-touch", "stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted")
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: record.DefaultNamespace, Name: record.Name("rec-touch", mc.GetUID(), false)}, cm)).To(Succeed())
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations["example.com/reviewed"] = "yes"
		Expect(k8s.Update(ctx, cm)).To(Succeed())

		agent.setStuck("rec-touch", "early", false)
		clusterGone("rec-touch")
		r := endedRecord("rec-touch")
		Expect(entryKeys(r.Deletes())).To(Equal([]string{
			"stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/late deleted done",
			"namespace namespaces/rec-touch deleted done",
		}))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		Expect(cm.Annotations).To(HaveKeyWithValue("example.com/reviewed", "yes"))
	})

	It("writes its record again, whole, when it is deleted mid-teardown, and resolves it after a restart", func() {
		fleetCluster("rec-lost", nil, true)
		priority := func(p string) map[string]string {
			return map[string]string{"open-cluster-management.io/cleanup-priority": p}
		}
		work("rec-lost", "early", priority("10"))
		work("rec-lost", "late", priority("90"))
		agent.setStuck("rec-lost", "early", true)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-lost", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("rec-lost", "rec-lost")
		mc := getClusterNow("rec-lost")
		name := record.Name("rec-lost", mc.GetUID(), false)

		deleteCluster("rec-lost")
		recordLists("rec-lost", "stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted")
		Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: record.DefaultNamespace, Name: name}})).To(Succeed())
		agent.setStuck("rec-lost", "early", false)
		// Written again from memory at the next group: the first group's
		// entry is not lost.
		recordLists("rec-lost", "stage/manifestworks manifestworks.work.open-cluster-management.io/late deleted")
		recordLists("rec-lost", "stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted")
		clusterGone("rec-lost")
		r := endedRecord("rec-lost")
		Expect(r.Resumed).To(BeFalse())
		Expect(entryKeys(r.Deletes())).To(Equal([]string{
			"stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/late deleted done",
			"namespace namespaces/rec-lost deleted done",
		}))
	})

	It("resolves, after a restart, what the stopped manager intended and did", func() {
		fleetCluster("rec-restart", nil, true)
		priority := func(p string) map[string]string {
			return map[string]string{"open-cluster-management.io/cleanup-priority": p}
		}
		work("rec-restart", "early", priority("10"))
		work("rec-restart", "late", priority("90"))
		agent.setStuck("rec-restart", "early", true)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-restart", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("rec-restart", "rec-restart")

		deleteCluster("rec-restart")
		recordLists("rec-restart", "stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted")
		// The record is written before the delete it announces: stopped
		// between the two, the restarted manager finds the work not
		// deleting and deletes it itself (nothing to resolve). Here the
		// delete has gone through.
		Eventually(func(g Gomega) {
			early := &workv1.ManifestWork{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rec-restart", Name: "early"}, early)).To(Succeed())
			g.Expect(early.DeletionTimestamp).NotTo(BeNil())
		}).Should(Succeed())
		// Stopped while the first group waits: its done mark was never
		// written (it goes with the next write).
		stopManager()
		rs := records(Default, "rec-restart")
		Expect(entryKeys(rs[0].Deletes())).To(ContainElement("stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted intended"))
		startManager()
		agent.setStuck("rec-restart", "early", false)
		clusterGone("rec-restart")
		r := endedRecord("rec-restart")
		Expect(entryKeys(r.Deletes())).To(Equal([]string{
			"stage/manifestworks manifestworks.work.open-cluster-management.io/early deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/late deleted done",
			"namespace namespaces/rec-restart deleted done",
		}))
		Expect(r.Deletes()[0].Note).To(Equal("resolved after a restart"))
	})

	// A manager stopped between its label and its first delete leaves the
	// teardown with the label alone, not announced: no record exists yet.
	// Read from the namespace, the label is listed as the operator's when
	// its field manager owns it; then the record begins with the first
	// delete, not taken for a record lost.
	DescribeTable("a label made before the record began",
		func(cluster, owner string, listed bool) {
			fleetCluster(cluster, nil, true)
			work(cluster, "app", nil)
			Expect(k8s.Create(ctx, cleanupPolicy(cluster, v1alpha1.CleanupPolicySpec{}))).To(Succeed())
			governedBy(cluster, cluster)
			stopManager()
			deleteCluster(cluster)
			labelNamespace(cluster, owner)
			Expect(records(Default, cluster)).To(BeEmpty())
			startManager()
			clusterGone(cluster)
			r := endedRecord(cluster)
			Expect(r.Resumed).To(BeFalse())
			want := []string{
				"stage/manifestworks manifestworks.work.open-cluster-management.io/app deleted done",
				"namespace namespaces/" + cluster + " deleted done",
			}
			if listed {
				want = append([]string{"signal namespaces/" + cluster + " labelled done"}, want...)
			}
			Expect(entryKeys(r.Entries)).To(Equal(want))
			if listed {
				Expect(r.Entries[0].Note).To(Equal("labelled before the record began"))
			}
		},
		Entry("by the operator: listed", "rec-label", v1alpha1.FieldManager, true),
		Entry("by someone else: not the operator's", "rec-otherlabel", "someone-else", false),
	)

	It("lists a label made just before a restart when its record already existed", func() {
		fleetCluster("rec-relabel", nil, true)
		work("rec-relabel", "app", nil)
		Eventually(func(g Gomega) int64 { return appliedGeneration(g, "rec-relabel", "app") }).Should(BeEquivalentTo(1))
		agent.setLagging("rec-relabel", true)
		DeferCleanup(agent.setLagging, "rec-relabel", false)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-relabel", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyNeedless},
		}))).To(Succeed())
		governedBy("rec-relabel", "rec-relabel")

		// Needless: the Orphan is stamped, and recorded, before the label;
		// the teardown waits for the agent to apply it.
		deleteCluster("rec-relabel")
		Eventually(func(g Gomega) {
			rs := records(g, "rec-relabel")
			g.Expect(rs).To(HaveLen(1))
			g.Expect(rs[0].Entries).NotTo(BeEmpty())
		}).Should(Succeed())
		// As a manager stopped right after its label leaves the teardown:
		// the label alone is not announced, so the record does not list it.
		stopManager()
		labelNamespace("rec-relabel", v1alpha1.FieldManager)
		Expect(entryKeys(records(Default, "rec-relabel")[0].Entries)).NotTo(ContainElement(HaveSuffix(" labelled done")))
		agent.setLagging("rec-relabel", false)
		startManager()
		clusterGone("rec-relabel")
		r := endedRecord("rec-relabel")
		Expect(entryKeys(r.Entries)).To(ContainElement("signal namespaces/rec-relabel labelled done"))
		for _, e := range r.Entries {
			if e.Action == record.Labelled {
				Expect(e.Note).To(Equal("labelled before a restart"))
			}
		}
	})

	It("writes nothing while pre-cleanup hooks hold the teardown, then records how long they held", func() {
		fleetCluster("rec-hooks", nil, true)
		work("rec-hooks", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("rec-hooks", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("rec-hooks", "rec-hooks")
		mc := getClusterNow("rec-hooks")
		annotations := mc.GetAnnotations()
		annotations[v1alpha1.PreCleanupHookPrefix+"backup"] = "velero"
		mc.SetAnnotations(annotations)
		Expect(k8s.Update(ctx, mc)).To(Succeed())

		deleteCluster("rec-hooks")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "rec-hooks").Reason).To(Equal(v1alpha1.WaitingForHooksReason))
		}).Should(Succeed())
		Consistently(func(g Gomega) []record.Record { return records(g, "rec-hooks") }, "2s").Should(BeEmpty())

		mc = getClusterNow("rec-hooks")
		annotations = mc.GetAnnotations()
		delete(annotations, v1alpha1.PreCleanupHookPrefix+"backup")
		mc.SetAnnotations(annotations)
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		clusterGone("rec-hooks")
		r := endedRecord("rec-hooks")
		Expect(r.Holds).To(HaveLen(1))
		Expect(r.Holds[0].Reason).To(ContainSubstring(v1alpha1.PreCleanupHookPrefix + "backup"))
		Expect(r.Holds[0].Start).To(Equal(r.Start))
		Expect(r.Holds[0].End).NotTo(BeNil())
		Expect(r.Holds[0].End.Sub(r.Holds[0].Start.Time)).To(BeNumerically(">=", 2*time.Second))
		Expect(entryKeys(r.Deletes())).To(ContainElement("stage/manifestworks manifestworks.work.open-cluster-management.io/app deleted done"))
	})

	It("keeps, per cluster, the newest ended records up to the count, none past the age, and every one in progress", func() {
		now := time.Now()
		save := func(cluster, uid string, endedAgo time.Duration) string {
			r := &record.Record{Cluster: cluster, UID: typesUID(uid), Start: metav1.NewTime(now.Add(-endedAgo - time.Minute)), Entries: []record.Entry{}}
			r.Name = record.Name(cluster, r.UID, false)
			if endedAgo > 0 {
				end := metav1.NewTime(now.Add(-endedAgo))
				r.End = &end
			}
			_, err := record.Save(ctx, k8s, record.DefaultNamespace, r, nil)
			Expect(err).NotTo(HaveOccurred())
			return r.Name
		}
		a1 := save("ret-a", "11111111-0000", 1*time.Hour)
		a2 := save("ret-a", "22222222-0000", 2*time.Hour)
		a3 := save("ret-a", "33333333-0000", 3*time.Hour)
		a4 := save("ret-a", "44444444-0000", 4*time.Hour)
		running := save("ret-a", "55555555-0000", 0)
		b1 := save("ret-b", "66666666-0000", 100*24*time.Hour)
		b2 := save("ret-b", "77777777-0000", 24*time.Hour)
		foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: record.DefaultNamespace, Name: "teardown-ret-a-foreign",
			Labels: map[string]string{record.RecordLabel: "true", record.ClusterLabel: "ret-a"}}}
		Expect(k8s.Create(ctx, foreign)).To(Succeed())

		pruned, err := record.Prune(ctx, k8s, record.DefaultNamespace, "", record.Retention{PerCluster: 2, MaxAge: 30 * 24 * time.Hour}, now)
		Expect(err).NotTo(HaveOccurred())
		Expect(pruned).To(ConsistOf(a3, a4, b1))
		left := map[string]bool{}
		for _, r := range append(records(Default, "ret-a"), records(Default, "ret-b")...) {
			left[r.Name] = true
		}
		Expect(left).To(Equal(map[string]bool{a1: true, a2: true, running: true, b2: true}))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
		Expect(k8s.Delete(ctx, foreign)).To(Succeed())
		for name := range left {
			Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: record.DefaultNamespace, Name: name}})).To(Succeed())
		}
	})
})

func typesUID(s string) types.UID { return types.UID(s) }
