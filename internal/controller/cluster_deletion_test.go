package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// governedBy waits until the cluster carries the operator's finalizer and
// names its governing policy.
func governedBy(cluster, policy string) {
	Eventually(func(g Gomega) {
		mc := getCluster(g, cluster)
		g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, policy))
		// Both are written under the operator's field manager, which
		// GitOps tools are told to ignore.
		var owned string
		for _, f := range mc.GetManagedFields() {
			if f.Manager == v1alpha1.FieldManager && f.FieldsV1 != nil {
				owned += string(f.FieldsV1.Raw)
			}
		}
		g.Expect(owned).To(ContainSubstring(`"f:` + v1alpha1.GoverningPolicyAnnotation + `"`))
		g.Expect(owned).To(ContainSubstring(`"v:\"` + v1alpha1.ClusterCleanupFinalizer + `\""`))
	}).Should(Succeed())
}

func clusterGone(name string) {
	Eventually(objectGone("ManagedCluster", "", name)).Should(BeTrue(), "cluster %s is still there", name)
}

func events(object string) []string {
	var list eventsv1.EventList
	Expect(k8s.List(ctx, &list)).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == object {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

var _ = Describe("Cluster deletion", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	// OCM cluster deletion, story 2: a namespace the policy keeps stays.
	It("keeps the namespace when keepNamespace is true, and unlabels it", func() {
		fleetCluster("keep-1", map[string]string{"env": "prod"}, true)
		ns := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "keep-1"}, ns)).To(Succeed())
		ns.Labels = map[string]string{"cluster.open-cluster-management.io/keep-upon-cluster-deletion": "true"}
		Expect(k8s.Update(ctx, ns)).To(Succeed())
		work("keep-1", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("keep", v1alpha1.CleanupPolicySpec{
			KeepNamespace: "namespace.metadata.labels[?'cluster.open-cluster-management.io/keep-upon-cluster-deletion'].orValue('') == 'true'",
		}))).To(Succeed())
		governedBy("keep-1", "keep")

		deleteCluster("keep-1")
		clusterGone("keep-1")
		Expect(objectGone("ManifestWork", "keep-1", "app")()).To(BeTrue())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "keep-1"}, ns)).To(Succeed())
		Expect(ns.DeletionTimestamp).To(BeNil())
		Expect(ns.Labels).NotTo(HaveKey(v1alpha1.ClusterDeletingLabel))
		Expect(ns.Labels).NotTo(HaveKey(v1alpha1.GovernedNamespaceLabel), "OCM's cleanup is not held on a namespace kept")
		Expect(ns.Annotations).NotTo(HaveKey(v1alpha1.GoverningPolicyAnnotation))
	})

	// OCM cluster deletion, story 3: nothing is deleted while an application remains.
	It("holds everything while a monitored resource remains, and deletes none of them", func() {
		fleetCluster("gate-1", nil, true)
		addon("gate-1", "search")
		app := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "gate-1", Labels: map[string]string{"app": "shop"}}}
		Expect(k8s.Create(ctx, app)).To(Succeed())
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "gate-1"}}
		Expect(k8s.Create(ctx, other)).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("gated", v1alpha1.CleanupPolicySpec{
			MonitoredResources: []v1alpha1.MonitoredResource{{
				GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				When:                 "object.metadata.labels[?'app'].hasValue()",
			}},
		}))).To(Succeed())
		governedBy("gate-1", "gated")

		deleteCluster("gate-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "gate-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.WaitingForMonitoredResourcesReason))
			g.Expect(c.Message).To(ContainSubstring("configmaps/app"))
			g.Expect(c.Message).NotTo(ContainSubstring("unrelated"))
		}).Should(Succeed())
		Consistently(objectGone("ManagedClusterAddOn", "gate-1", "search"), "2s").Should(BeFalse())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(app), app)).To(Succeed())

		Expect(k8s.Delete(ctx, app)).To(Succeed())
		clusterGone("gate-1")
		Expect(objectGone("ManagedClusterAddOn", "gate-1", "search")()).To(BeTrue())
	})

	// Signal cluster deletion: stories 1 and 2, the Alive object.
	It("keeps the deletion-signal work on a governed cluster, and deletes and awaits it first", func() {
		fleetCluster("sig-1", nil, true)
		work("sig-1", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("signal", v1alpha1.CleanupPolicySpec{
			DeletionSignal: &v1alpha1.DeletionSignal{WorkName: "alive", Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
				Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"}}`)}}}},
		}))).To(Succeed())
		governedBy("sig-1", "signal")
		signal := &unstructured.Unstructured{}
		signal.SetAPIVersion("work.open-cluster-management.io/v1")
		signal.SetKind("ManifestWork")
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: "sig-1", Name: "alive"}, signal) }).Should(Succeed())
		manifests, _, _ := unstructured.NestedSlice(signal.Object, "spec", "workload", "manifests")
		Expect(manifests).To(HaveLen(1))
		Expect(signal.GetLabels()).To(HaveKeyWithValue(v1alpha1.SignalWorkLabel, "true"))
		Expect(signal.GetLabels()).To(HaveKeyWithValue(v1alpha1.ManagedByLabel, v1alpha1.ManagedBy))
		// The test's work agent reports it applied: a status write.
		rv := appliedWork("sig-1", "alive").GetResourceVersion()

		By("not rewriting an unchanged signal work")
		Consistently(func(g Gomega) string {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "sig-1", Name: "alive"}, signal)).To(Succeed())
			return signal.GetResourceVersion()
		}, "2s").Should(Equal(rv))

		By("updating it when the policy's manifests change")
		p := &v1alpha1.CleanupPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "signal"}, p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.DeletionSignal.Manifests = append(p.Spec.DeletionSignal.Manifests, v1alpha1.Manifest{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive-2","namespace":"kube-system"}}`)}})
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "sig-1", Name: "alive"}, signal)).To(Succeed())
			manifests, _, _ := unstructured.NestedSlice(signal.Object, "spec", "workload", "manifests")
			g.Expect(manifests).To(HaveLen(2))
		}).Should(Succeed())
		var works metav1.PartialObjectMetadataList
		works.SetGroupVersionKind(schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWorkList"})
		Expect(k8s.List(ctx, &works, client.InNamespace("sig-1"), client.MatchingLabels{v1alpha1.SignalWorkLabel: "true"})).To(Succeed())
		Expect(works.Items).To(HaveLen(1), "the signal work is not duplicated")

		By("applying it again when someone takes its signal label off")
		Expect(k8s.Patch(ctx, signal.DeepCopy(), client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+v1alpha1.SignalWorkLabel+`":null}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "sig-1", Name: "alive"}, signal)).To(Succeed())
			g.Expect(signal.GetLabels()).To(HaveKeyWithValue(v1alpha1.SignalWorkLabel, "true"))
		}).Should(Succeed())

		By("putting its deleteOption back when someone has it orphan its manifests")
		Expect(k8s.Patch(ctx, signal.DeepCopy(), client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"deleteOption":{"propagationPolicy":"Orphan"}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "sig-1", Name: "alive"}, signal)).To(Succeed())
			policy, _, _ := unstructured.NestedString(signal.Object, "spec", "deleteOption", "propagationPolicy")
			g.Expect(policy).To(Equal("Foreground"))
		}).Should(Succeed())

		By("deleting the signal first and waiting while an in-cluster controller holds it")
		// The agent adds its finalizer once it applied the work.
		patch := []byte(`{"metadata":{"finalizers":["` + v1alpha1.WorkAgentFinalizer + `"]}}`)
		Expect(k8s.Patch(ctx, signal, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		agent.setStuck("sig-1", "alive", true)
		deleteCluster("sig-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "sig-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.SignallingReason))
			g.Expect(c.Message).To(ContainSubstring("alive"))
		}).Should(Succeed())
		ns := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "sig-1"}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue(v1alpha1.ClusterDeletingLabel, "true"))
		Consistently(objectGone("ManifestWork", "sig-1", "app"), "2s").Should(BeFalse())

		By("refusing new work in the namespace while the cleanup runs")
		late := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "late", "namespace": "sig-1"},
			"spec":     map[string]any{"workload": map[string]any{"manifests": []any{}}},
		}}
		Eventually(func() string {
			err := k8s.Create(ctx, late, client.DryRunAll)
			if err == nil {
				return ""
			}
			return err.Error()
		}).Should(ContainSubstring("cluster sig-1 is being deleted"))

		agent.setStuck("sig-1", "alive", false)
		clusterGone("sig-1")
		Expect(objectGone("ManifestWork", "sig-1", "app")()).To(BeTrue())
	})

	It("deletes in stage order, and within a stage by cleanup-priority, one group at a time", func() {
		fleetCluster("ord-1", nil, true)
		addon("ord-1", "a1")
		prio := func(p string) map[string]string {
			return map[string]string{"open-cluster-management.io/cleanup-priority": p}
		}
		work("ord-1", "w-50", prio("50"))
		work("ord-1", "w-10", prio("10"))
		work("ord-1", "w-bad", prio("high"))
		work("ord-1", "w-none", nil)
		work("ord-1", "w-10b", prio("10"))
		work("ord-1", "ord-1-klusterlet", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("staged", v1alpha1.CleanupPolicySpec{
			DeletionStages: []v1alpha1.DeletionStage{
				{Name: "addons", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}},
				{Name: "workloads", GroupVersionResource: gvrWorks(), When: "!object.metadata.name.endsWith('-klusterlet')"},
				{Name: "klusterlet", GroupVersionResource: gvrWorks()},
			},
		}))).To(Succeed())
		governedBy("ord-1", "staged")

		deleteCluster("ord-1")
		clusterGone("ord-1")
		order := agent.order()
		var mine []string
		for _, o := range order {
			if strings.HasPrefix(o, "ord-1/") {
				mine = append(mine, strings.TrimPrefix(o, "ord-1/"))
			}
		}
		// Groups: unset, invalid, 10 (two works), 50, then the klusterlet stage.
		Expect(mine).To(HaveLen(6))
		Expect(mine[0]).To(Equal("w-none"))
		Expect(mine[1]).To(Equal("w-bad"))
		Expect(mine[2:4]).To(ConsistOf("w-10", "w-10b"))
		Expect(mine[4]).To(Equal("w-50"))
		Expect(mine[5]).To(Equal("ord-1-klusterlet"))
	})

	// Karmada unjoin, Required: halt and report which work could not be removed.
	It("reports CleanupFailed naming a stuck work after the Required timeout, and keeps waiting", func() {
		fleetCluster("req-1", nil, true)
		work("req-1", "stuck", nil)
		agent.setStuck("req-1", "stuck", true)
		Expect(k8s.Create(ctx, cleanupPolicy("required", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired, Timeout: &metav1.Duration{Duration: 2 * time.Second}},
		}))).To(Succeed())
		governedBy("req-1", "required")

		deleteCluster("req-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "req-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/stuck"))
		}).Should(Succeed())
		Consistently(func(g Gomega) []string {
			return getCluster(g, "req-1").GetFinalizers()
		}, "2s").Should(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		stuck := &metav1.PartialObjectMetadata{}
		stuck.SetGroupVersionKind(gvkWork())
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "req-1", Name: "stuck"}, stuck)).To(Succeed())
		Expect(stuck.Finalizers).To(ContainElement(v1alpha1.WorkAgentFinalizer), "Required never forces")

		agent.setStuck("req-1", "stuck", false)
		clusterGone("req-1")
	})

	It("forces a stuck work after the BestEffort timeout and records it", func() {
		fleetCluster("be-1", nil, true)
		work("be-1", "stuck", nil)
		agent.setStuck("be-1", "stuck", true)
		Expect(k8s.Create(ctx, cleanupPolicy("besteffort", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort, Timeout: &metav1.Duration{Duration: 2 * time.Second}},
		}))).To(Succeed())
		governedBy("be-1", "besteffort")

		deleteCluster("be-1")
		clusterGone("be-1")
		Expect(objectGone("ManifestWork", "be-1", "stuck")()).To(BeTrue())
		Eventually(func() string { return strings.Join(events("be-1"), "\n") }).Should(ContainSubstring(v1alpha1.ForcedReason + ": BestEffort (the timeout passed): removed the work agent's finalizer from manifestworks/stuck"))
		Expect(testutil.ToFloat64(op.Metrics.ForcedObjects.WithLabelValues("manifestworks"))).To(BeNumerically(">=", 1))
		Expect(testutil.CollectAndCount(op.Metrics.Duration)).To(BeNumerically(">=", 1))
		// The operator's finalizer was the cluster's only one, but the
		// outcome is read from the forced count this process wrote: it is
		// written with its check that the cache shows that count.
		writes := statusWrites("be-1")
		Expect(writes).NotTo(BeEmpty())
		Expect(writes[len(writes)-1].Reason).To(Equal(v1alpha1.ForcedReason))
	})

	It("counts the BestEffort timeout from a resume its policy's hold kept from being reported", func() {
		fleetCluster("rh-1", map[string]string{"rh": "1", "tier": "prod"}, true)
		work("rh-1", "stuck", nil)
		agent.setStuck("rh-1", "stuck", true)
		Expect(k8s.Create(ctx, cleanupPolicy("resumed-held", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'rh'].orValue('') == '1'",
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort, Timeout: &metav1.Duration{Duration: 6 * time.Second},
				Rules: []v1alpha1.StrategyRule{{When: "cluster.metadata.labels['tier'] == 'prod'", Strategy: v1alpha1.RemoveStrategyBestEffort}}},
		}))).To(Succeed())
		governedBy("rh-1", "resumed-held")
		deleteCluster("rh-1")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "rh-1").Reason).To(BeElementOf(v1alpha1.DeletingStageReason, v1alpha1.ResourcesRemainingReason))
		}).Should(Succeed())

		By("paused past the timeout; its strategy undecidable as it resumes")
		patchMeta("rh-1", "annotations", v1alpha1.PausedAnnotation, "true")
		patchMeta("rh-1", "labels", "tier", "")
		Consistently(func() bool { return objectGone("ManifestWork", "rh-1", "stuck")() }, "7s").Should(BeFalse())
		patchMeta("rh-1", "annotations", v1alpha1.PausedAnnotation, "")
		Eventually(func(g Gomega) { g.Expect(contentDelete(g, "rh-1").Message).To(ContainSubstring("no such key: tier")) }).Should(Succeed())

		By("the hold ending: the timeout counts from the resume, so nothing is forced at once")
		patchMeta("rh-1", "labels", "tier", "prod")
		Consistently(func() bool { return objectGone("ManifestWork", "rh-1", "stuck")() }, "3s").Should(BeFalse())
		clusterGone("rh-1")
	})

	It("forces at once under BestEffort when the cluster is unavailable", func() {
		fleetCluster("gone-1", nil, false)
		work("gone-1", "app", nil)
		agent.setStuck("gone-1", "app", true) // the agent is gone with the cluster
		Expect(k8s.Create(ctx, cleanupPolicy("besteffort-long", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort, Timeout: &metav1.Duration{Duration: time.Hour}},
		}))).To(Succeed())
		governedBy("gone-1", "besteffort-long")

		deleteCluster("gone-1")
		clusterGone("gone-1")
		Eventually(func() string { return strings.Join(events("gone-1"), "\n") }).Should(ContainSubstring("BestEffort (the cluster is unavailable)"))
	})

	// Whoever may write a ManagedCluster's status can say it is unavailable;
	// only its agent renews its lease.
	It("does not force at once on an Available condition its agent's fresh lease belies, and forces once the lease is stale", func() {
		fleetCluster("lease-1", nil, false)
		Expect(k8s.Patch(ctx, managedCluster("lease-1", nil), client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"leaseDurationSeconds":2}}`)))).To(Succeed())
		work("lease-1", "app", nil)
		agent.setStuck("lease-1", "app", true)
		Expect(k8s.Create(ctx, cleanupPolicy("besteffort-lease", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort, Timeout: &metav1.Duration{Duration: time.Hour}},
		}))).To(Succeed())
		governedBy("lease-1", "besteffort-lease")

		// The agent renews its lease (grace: 5 x 2s) while the condition
		// says nothing of the cluster being available.
		renewed := metav1.NewMicroTime(time.Now())
		Expect(k8s.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: decision.ClusterLeaseName, Namespace: "lease-1"},
			Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}})).To(Succeed())
		deleteCluster("lease-1")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "lease-1").Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
		}).Should(Succeed())
		Consistently(func() bool { return objectGone("ManifestWork", "lease-1", "app")() }, "3s").Should(BeFalse(),
			"the work was forced while the agent's lease was fresh")

		By("the lease going stale, with no renewal and no event: the teardown forces")
		clusterGone("lease-1")
		Eventually(func() string { return strings.Join(events("lease-1"), "\n") }).Should(ContainSubstring("BestEffort (the cluster is unavailable)"))
	})

	// The work agent orphans a work's resources when it applies the
	// deleteOption: a work deleted before that would take them with it.
	It("deletes a Needless cluster's works only once the agent applied their Orphan", func() {
		fleetCluster("nl-2", map[string]string{"tier": "sandbox"}, true)
		w := work("nl-2", "app", nil)
		// The agent applied generation 1 and said so, then falls behind.
		Eventually(func(g Gomega) int64 { return appliedGeneration(g, "nl-2", "app") }).Should(BeEquivalentTo(1))
		agent.setLagging("nl-2", true)
		DeferCleanup(agent.setLagging, "nl-2", false)
		Expect(k8s.Create(ctx, cleanupPolicy("sandbox-applied", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyNeedless},
		}))).To(Succeed())
		governedBy("nl-2", "sandbox-applied")

		deleteCluster("nl-2")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "nl-2")
			g.Expect(c.Reason).To(Equal(v1alpha1.OrphaningReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/app"))
		}).Should(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
		Expect(w.GetDeletionTimestamp()).To(BeNil(), "the work was deleted before the agent applied its Orphan")
		Expect(w.GetGeneration()).To(Equal(int64(2)))
		propagation, _, _ := unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy")
		Expect(propagation).To(Equal("Orphan"))

		// The agent applies generation 2: the cleanup goes on.
		agent.setLagging("nl-2", false)
		clusterGone("nl-2")
		Eventually(func() []string { return events("nl-2") }).Should(ContainElement(HavePrefix(v1alpha1.OrphaningReason + ": Needless: waiting for the work agent")))
	})

	// Karmada unjoin, Needless: nothing on the managed cluster is removed.
	It("orphans every work before deleting it under Needless", func() {
		fleetCluster("nl-1", map[string]string{"tier": "sandbox"}, true)
		work("nl-1", "app", nil)
		work("nl-1", "db", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("sandbox", v1alpha1.CleanupPolicySpec{
			Variables: []v1alpha1.Variable{{Name: "tier", Expression: "cluster.metadata.labels[?'tier'].orValue('standard')"}},
			RemoveStrategy: v1alpha1.RemoveStrategy{
				Default: v1alpha1.RemoveStrategyRequired,
				Rules:   []v1alpha1.StrategyRule{{When: "variables.tier == 'sandbox'", Strategy: v1alpha1.RemoveStrategyNeedless}},
			},
		}))).To(Succeed())
		governedBy("nl-1", "sandbox")

		agent.setStuck("nl-1", "app", true)
		deleteCluster("nl-1")
		Eventually(func(g Gomega) {
			w := &unstructured.Unstructured{}
			w.SetAPIVersion("work.open-cluster-management.io/v1")
			w.SetKind("ManifestWork")
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "nl-1", Name: "app"}, w)).To(Succeed())
			g.Expect(w.GetDeletionTimestamp()).NotTo(BeNil())
			policy, _, _ := unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy")
			g.Expect(policy).To(Equal("Orphan"), "the work was deleted before it was orphaned")
		}).Should(Succeed())
		agent.setStuck("nl-1", "app", false)
		clusterGone("nl-1")
		Eventually(func() string { return strings.Join(events("nl-1"), "\n") }).Should(ContainSubstring(v1alpha1.OrphanedReason))
		Expect(testutil.ToFloat64(op.Metrics.OrphanedWorks)).To(BeNumerically(">=", 2))
	})

	It("holds the cluster, deleting nothing, when the policy fails at run time for it", func() {
		fleetCluster("err-1", nil, true)
		addon("err-1", "search")
		Expect(k8s.Create(ctx, cleanupPolicy("fragile", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{
				Default: v1alpha1.RemoveStrategyRequired,
				Rules:   []v1alpha1.StrategyRule{{When: "cluster.metadata.labels['tier'] == 'sandbox'", Strategy: v1alpha1.RemoveStrategyNeedless}},
			},
		}))).To(Succeed())
		governedBy("err-1", "fragile")

		deleteCluster("err-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "err-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("spec.removeStrategy.rules[0].when: no such key: tier"))
		}).Should(Succeed())
		Consistently(objectGone("ManagedClusterAddOn", "err-1", "search"), "2s").Should(BeFalse())

		By("going on once the label is there")
		mc := getCluster(Default, "err-1")
		mc.SetLabels(map[string]string{"tier": "gold"})
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		clusterGone("err-1")
	})

	It("previews the cleanup in dry run, deleting nothing and keeping the finalizer", func() {
		fleetCluster("dry-1", nil, true)
		addon("dry-1", "search")
		work("dry-1", "app", nil)
		p := cleanupPolicy("preview", v1alpha1.CleanupPolicySpec{DryRun: true})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		governedBy("dry-1", "preview")

		deleteCluster("dry-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "dry-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.DryRunReason))
			g.Expect(c.Message).To(ContainSubstring("stage addons would delete 1 managedclusteraddons: managedclusteraddons/search"))
			g.Expect(c.Message).To(ContainSubstring("stage manifestworks would delete 1 manifestworks: manifestworks/app"))
			g.Expect(c.Message).To(ContainSubstring("would delete namespace dry-1"))
		}).Should(Succeed())
		Consistently(objectGone("ManagedClusterAddOn", "dry-1", "search"), "2s").Should(BeFalse())
		Expect(getCluster(Default, "dry-1").GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		Eventually(func() string { return strings.Join(events("dry-1"), "\n") }).Should(ContainSubstring(v1alpha1.DryRunReason))

		By("proceeding once dry run is off")
		before := p.DeepCopy()
		p.Spec.DryRun = false
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		clusterGone("dry-1")
	})

	It("resumes a cleanup after a manager restart without repeating or skipping a step", func() {
		fleetCluster("rs-1", nil, true)
		addon("rs-1", "search")
		for _, w := range []string{"w1", "w2", "w3"} {
			work("rs-1", w, nil)
		}
		agent.setStuck("rs-1", "w1", true)
		Expect(k8s.Create(ctx, cleanupPolicy("restart", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("rs-1", "restart")
		deletedWorks := func() float64 { return testutil.ToFloat64(op.Metrics.DeletedObjects.WithLabelValues("manifestworks")) }
		deletedAddons := func() float64 {
			return testutil.ToFloat64(op.Metrics.DeletedObjects.WithLabelValues("managedclusteraddons"))
		}
		works0, addons0 := deletedWorks(), deletedAddons()

		deleteCluster("rs-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "rs-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
			g.Expect(c.Message).To(ContainSubstring("stage manifestworks (2 of 2): 1 manifestworks remain"))
		}).Should(Succeed())
		Expect(deletedWorks() - works0).To(BeEquivalentTo(3))
		Expect(deletedAddons() - addons0).To(BeEquivalentTo(1))

		By("restarting the manager in the middle of the stage")
		stopManager()
		works0, addons0 = deletedWorks(), deletedAddons()
		startManager()
		Consistently(func(g Gomega) string {
			return contentDelete(g, "rs-1").Reason
		}, "2s").Should(Equal(v1alpha1.ResourcesRemainingReason))
		Expect(deletedWorks()-works0).To(BeZero(), "a deleting work was deleted again")
		Expect(deletedAddons()-addons0).To(BeZero(), "a finished stage was repeated")

		agent.setStuck("rs-1", "w1", false)
		clusterGone("rs-1")
		Expect(deletedWorks() - works0).To(BeZero())
	})

	It("follows a policy changed during the cleanup", func() {
		fleetCluster("chg-1", nil, true)
		work("chg-1", "stuck", nil)
		agent.setStuck("chg-1", "stuck", true)
		p := cleanupPolicy("changing", v1alpha1.CleanupPolicySpec{})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		governedBy("chg-1", "changing")
		deleteCluster("chg-1")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "chg-1").Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
		}).Should(Succeed())

		before := p.DeepCopy()
		p.Spec.RemoveStrategy = v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort, Timeout: &metav1.Duration{Duration: time.Second}}
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		clusterGone("chg-1")
		Eventually(func() string { return strings.Join(events("chg-1"), "\n") }).Should(ContainSubstring(v1alpha1.ForcedReason))
	})

	It("is governed by the higher-priority policy when two select the cluster", func() {
		fleetCluster("two-1", map[string]string{"env": "prod"}, true)
		work("two-1", "app", nil)
		work("two-1", "keep-me", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("low", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("high", v1alpha1.CleanupPolicySpec{
			Priority:        5,
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
			DeletionStages: []v1alpha1.DeletionStage{
				{Name: "only-app", GroupVersionResource: gvrWorks(), When: "object.metadata.name == 'app'"},
			},
			KeepNamespace: "true",
		}))).To(Succeed())
		governedBy("two-1", "high")

		deleteCluster("two-1")
		clusterGone("two-1")
		Expect(objectGone("ManifestWork", "two-1", "app")()).To(BeTrue())
		Expect(objectGone("ManifestWork", "two-1", "keep-me")()).To(BeFalse(), "the higher policy's stages do not include it")
	})

	It("releases a cluster no policy governs any more, retiring its signal work without signalling", func() {
		fleetCluster("rel-1", map[string]string{"env": "prod"}, true)
		p := cleanupPolicy("releasing", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
			DeletionSignal:  &v1alpha1.DeletionSignal{WorkName: "alive"},
		})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		governedBy("rel-1", "releasing")
		Eventually(objectGone("ManifestWork", "rel-1", "alive")).Should(BeFalse())

		mc := getCluster(Default, "rel-1")
		mc.SetLabels(map[string]string{"env": "dev"})
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		Eventually(func(g Gomega) []string { return getCluster(g, "rel-1").GetFinalizers() }).
			ShouldNot(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		Eventually(objectGone("ManifestWork", "rel-1", "alive")).Should(BeTrue())
	})
})

func gvrWorks() v1alpha1.GroupVersionResource {
	return v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
}

func gvkWork() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork"}
}
