package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// labelAddonWork labels a work as OCM's add-on framework labels the works
// it makes for an add-on.
func labelAddonWork(namespace, name, addonName string) {
	patch := []byte(`{"metadata":{"labels":{"` + addonv1alpha1.AddonLabelKey + `":"` + addonName + `"}}}`)
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("work.open-cluster-management.io/v1")
	w.SetKind("ManifestWork")
	w.SetNamespace(namespace)
	w.SetName(name)
	Expect(k8s.Patch(ctx, w, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// addonWork creates an add-on's work as OCM's add-on framework does: its
// label, and the deleteOption the framework built (from the add-on's
// deletion-orphan annotations), under the add-on manager's field manager.
func addonWork(namespace, name, addonName string, deleteOption map[string]any, manifests ...map[string]any) {
	list := make([]any, len(manifests))
	for i, m := range manifests {
		list[i] = m
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
		"metadata": map[string]any{"name": name, "namespace": namespace,
			"labels":     map[string]any{addonv1alpha1.AddonLabelKey: addonName},
			"finalizers": []any{v1alpha1.WorkAgentFinalizer}},
		"spec": map[string]any{"workload": map[string]any{"manifests": list}, "deleteOption": deleteOption},
	}}
	Expect(k8s.Patch(ctx, w, client.Apply, client.FieldOwner("addon-manager"))).To(Succeed())
}

var _ = Describe("Add-on works and the work agent's Deleting condition", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(60 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("writes no deleteOption on an add-on's work and holds its teardown, saying how to keep the manifests", func() {
		fleetCluster("aw-1", nil, true)
		settings := manifest("v1", "ConfigMap", "default", "settings")
		other := manifest("v1", "ConfigMap", "default", "other")
		agentWork("aw-1", "addon-search-deploy", "addon-manager", settings, other)
		labelAddonWork("aw-1", "addon-search-deploy", "search")
		agentWork("aw-1", "app", "test", settings, other)
		Expect(k8s.Create(ctx, cleanupPolicy("addon-rules", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-settings", When: "manifest.metadata.name == 'settings'"}},
		}))).To(Succeed())
		governedBy("aw-1", "addon-rules")
		// The same rule reaches the work of no add-on: stamped.
		Eventually(func(g Gomega) any { return deleteOption(g, "aw-1", "app")["propagationPolicy"] }).Should(Equal("SelectivelyOrphan"))
		Consistently(func(g Gomega) map[string]any { return deleteOption(g, "aw-1", "addon-search-deploy") }, "2s").Should(BeEmpty())
		Expect(getWork(Default, "aw-1", "addon-search-deploy").GetAnnotations()).NotTo(HaveKey(v1alpha1.OrphaningAnnotation))

		deleteCluster("aw-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "aw-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/addon-search-deploy belongs to add-on search"))
			g.Expect(c.Message).To(ContainSubstring("by rule keep-settings"))
			g.Expect(c.Message).To(ContainSubstring(addonv1alpha1.DeletionOrphanAnnotationKey))
		}).Should(Succeed())
		Expect(deleteOption(Default, "aw-1", "addon-search-deploy")).To(BeEmpty())
		Expect(getWork(Default, "aw-1", "addon-search-deploy").GetDeletionTimestamp()).To(BeNil())
		Eventually(func(g Gomega) {
			rs := records(g, "aw-1")
			g.Expect(rs).NotTo(BeEmpty())
			g.Expect(rs[0].Holds).To(ContainElement(HaveField("Reason", ContainSubstring("belongs to add-on search"))))
		}).Should(Succeed())

		// The add-on's own cleanup takes its work: the teardown goes on.
		Expect(k8s.Delete(ctx, getWork(Default, "aw-1", "addon-search-deploy"))).To(Succeed())
		clusterGone("aw-1")
	})

	It("deletes an add-on's work whose deleteOption, built by the add-on framework, already keeps what the rules keep, writing none", func() {
		fleetCluster("aw-2", nil, true)
		settings := manifest("v1", "ConfigMap", "default", "settings")
		other := manifest("v1", "ConfigMap", "default", "other")
		// What the framework builds from a deletion-orphan annotation on
		// the settings ConfigMap: exactly what the rule keeps.
		addonWork("aw-2", "addon-search-deploy", "search", map[string]any{
			"propagationPolicy": "SelectivelyOrphan",
			"selectivelyOrphans": map[string]any{"orphaningRules": []any{
				map[string]any{"group": "", "resource": "configmaps", "namespace": "default", "name": "settings"}}},
		}, settings, other)
		// Orphan keeps more than the rule asks.
		addonWork("aw-2", "addon-logs-deploy", "logs", map[string]any{"propagationPolicy": "Orphan"}, settings, other)
		history := watchOptions("aw-2")
		Expect(k8s.Create(ctx, cleanupPolicy("addon-kept", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-settings", When: "manifest.metadata.name == 'settings'"}},
		}))).To(Succeed())
		governedBy("aw-2", "addon-kept")

		deleteCluster("aw-2")
		clusterGone("aw-2")
		Expect(agent.deletedWith("aw-2", "addon-search-deploy")).To(Equal("SelectivelyOrphan"))
		Expect(agent.deletedWith("aw-2", "addon-logs-deploy")).To(Equal("Orphan"))
		Expect(history.of("addon-search-deploy")).To(Equal([]string{"SelectivelyOrphan"}), "the add-on's deleteOption was written")
		Expect(history.of("addon-logs-deploy")).To(Equal([]string{"Orphan"}), "the add-on's deleteOption was written")
		r := endedRecord("aw-2")
		Expect(r.Holds).To(BeEmpty())
		for _, name := range []string{"addon-search-deploy", "addon-logs-deploy"} {
			Expect(r.Entries).To(ContainElement(And(HaveField("Name", name), HaveField("Action", record.Deleted))), name)
			Expect(r.Entries).NotTo(ContainElement(And(HaveField("Name", name), HaveField("Action", record.Stamped))), name)
			Expect(r.Entries).NotTo(ContainElement(And(HaveField("Name", name), HaveField("Action", record.Orphaned))), name)
		}
	})

	It("names a work stuck deleting, with the agent's Deleting condition, in the condition and the record", func() {
		fleetCluster("dc-1", nil, true)
		work("dc-1", "app", nil)
		agent.setStuck("dc-1", "app", true)
		DeferCleanup(agent.setStuck, "dc-1", "app", false)
		Expect(k8s.Create(ctx, cleanupPolicy("deleting-condition", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("dc-1", "deleting-condition")

		deleteCluster("dc-1")
		Eventually(func(g Gomega) { g.Expect(getWork(g, "dc-1", "app").GetDeletionTimestamp()).NotTo(BeNil()) }).Should(Succeed())
		// The agent writes the condition as OCM's work agent does while it
		// removes the work's resources.
		Eventually(func(g Gomega) {
			w := getWork(g, "dc-1", "app")
			conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
			conds = append(conds, map[string]any{"type": "Deleting", "status": "True", "reason": "WorkDeleting",
				"message": "ManifestWork is being deleted", "observedGeneration": w.GetGeneration(),
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
			g.Expect(unstructured.SetNestedSlice(w.Object, conds, "status", "conditions")).To(Succeed())
			g.Expect(k8s.Status().Update(ctx, w)).To(Succeed())
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			c := contentDelete(g, "dc-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
			g.Expect(c.Message).To(ContainSubstring("the work agent reports ManifestWork app: Deleting=True since"))
			g.Expect(c.Message).To(ContainSubstring("(WorkDeleting: ManifestWork is being deleted)"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			rs := records(g, "dc-1")
			g.Expect(rs).NotTo(BeEmpty())
			g.Expect(rs[0].Entries).To(ContainElement(And(HaveField("Name", "app"), HaveField("Action", record.Deleted),
				HaveField("Note", ContainSubstring("WorkDeleting: ManifestWork is being deleted")))))
		}).Should(Succeed())

		agent.setStuck("dc-1", "app", false)
		clusterGone("dc-1")
	})
})
