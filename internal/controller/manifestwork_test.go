package controller_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

func manifest(apiVersion, kind, namespace, name string) map[string]any {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
}

var crdManifest = map[string]any{
	"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
	"metadata": map[string]any{"name": "foos.example.com"},
	"spec": map[string]any{"group": "example.com", "scope": "Namespaced",
		"names":    map[string]any{"kind": "Foo", "plural": "foos"},
		"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}}},
}

// manifestWork creates a work with the given manifests, as fieldManager.
func manifestWork(namespace, name, fieldManager string, manifests ...map[string]any) *unstructured.Unstructured {
	list := make([]any, len(manifests))
	for i, m := range manifests {
		list[i] = m
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"workload": map[string]any{"manifests": list}},
	}}
	Expect(k8s.Patch(ctx, w, client.Apply, client.FieldOwner(fieldManager))).To(Succeed())
	return w
}

func getWork(g Gomega, namespace, name string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("work.open-cluster-management.io/v1")
	w.SetKind("ManifestWork")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, w)).To(Succeed())
	return w
}

func deleteOption(g Gomega, namespace, name string) map[string]any {
	opt, _, _ := unstructured.NestedMap(getWork(g, namespace, name).Object, "spec", "deleteOption")
	return opt
}

var _ = Describe("Orphaning rules on ManifestWorks", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	orphaningPolicy := func(name string, rules ...v1alpha1.OrphaningRule) {
		Expect(k8s.Create(ctx, cleanupPolicy(name, v1alpha1.CleanupPolicySpec{Orphaning: rules}))).To(Succeed())
	}

	// Seed example: all the resources of the work are orphaned.
	It("stamps Orphan when every manifest is orphaned", func() {
		fleetCluster("orph-1", nil, true)
		orphaningPolicy("all", v1alpha1.OrphaningRule{Name: "keep-configmaps", When: "manifest.kind == 'ConfigMap'"})
		manifestWork("orph-1", "work", "gitops", manifest("v1", "ConfigMap", "default", "cm1"))
		Eventually(func(g Gomega) {
			g.Expect(deleteOption(g, "orph-1", "work")).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(status("all")(g).Status.WorksStamped).To(BeEquivalentTo(1))
		}).Should(Succeed())

		By("writing nothing more while nothing changes")
		// The agent reports the stamped generation applied: its write, not
		// the operator's.
		Eventually(func(g Gomega) {
			g.Expect(appliedGeneration(g, "orph-1", "work")).To(Equal(getWork(g, "orph-1", "work").GetGeneration()))
		}).Should(Succeed())
		rv := getWork(Default, "orph-1", "work").GetResourceVersion()
		Consistently(func(g Gomega) string { return getWork(g, "orph-1", "work").GetResourceVersion() }, "2s").Should(Equal(rv))
	})

	// The signal work is the operator's by its managed-by label (docs: the
	// operator changes or deletes only objects that carry it); a work that
	// merely carries the signal label is any work, as in a teardown.
	It("stamps a work carrying the signal label without the managed-by label, never the operator's own work", func() {
		fleetCluster("orph-sig", nil, true)
		Expect(k8s.Create(ctx, cleanupPolicy("sig-rules", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-configmaps", When: "manifest.kind == 'ConfigMap'"}},
			DeletionSignal: &v1alpha1.DeletionSignal{WorkName: "alive", Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
				Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"}}`)}}}},
		}))).To(Succeed())
		copied := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "copy", "namespace": "orph-sig", "labels": map[string]any{v1alpha1.SignalWorkLabel: "true"}},
			"spec":     map[string]any{"workload": map[string]any{"manifests": []any{manifest("v1", "ConfigMap", "default", "cm1")}}},
		}}
		Expect(k8s.Patch(ctx, copied, client.Apply, client.FieldOwner("gitops"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(deleteOption(g, "orph-sig", "copy")).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getWork(g, "orph-sig", "alive").GetLabels()).To(HaveKeyWithValue(v1alpha1.ManagedByLabel, v1alpha1.ManagedBy))
		}).Should(Succeed())
		// The signal's own deleteOption: deleting the work deletes its manifests.
		Consistently(func(g Gomega) map[string]any { return deleteOption(g, "orph-sig", "alive") }, "2s").
			Should(Equal(map[string]any{"propagationPolicy": "Foreground"}))

		By("never stamping its own work, even one that lost its signal label")
		alive := getWork(Default, "orph-sig", "alive")
		Expect(k8s.Patch(ctx, alive, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+v1alpha1.SignalWorkLabel+`":null}}}`)))).To(Succeed())
		Consistently(func(g Gomega) {
			w := getWork(g, "orph-sig", "alive")
			g.Expect(w.GetLabels()).To(HaveKeyWithValue(v1alpha1.ManagedByLabel, v1alpha1.ManagedBy))
			manifests, _, _ := unstructured.NestedSlice(w.Object, "spec", "workload", "manifests")
			g.Expect(manifests).To(HaveLen(1), "the work's manifests are kept")
			g.Expect(deleteOption(g, "orph-sig", "alive")).To(Equal(map[string]any{"propagationPolicy": "Foreground"}))
		}, "3s").Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getWork(g, "orph-sig", "alive").GetLabels()).To(HaveKeyWithValue(v1alpha1.SignalWorkLabel, "true"))
		}).Should(Succeed())
	})

	// Seed example: only the CRD is orphaned.
	It("stamps SelectivelyOrphan for the CRD of a work holding a CRD and a ConfigMap", func() {
		fleetCluster("orph-2", nil, true)
		orphaningPolicy("crds", v1alpha1.OrphaningRule{Name: "keep-crds", When: "manifest.kind == 'CustomResourceDefinition'"})
		manifestWork("orph-2", "work", "gitops", manifest("v1", "ConfigMap", "default", "cm1"), crdManifest)
		Eventually(func(g Gomega) {
			g.Expect(deleteOption(g, "orph-2", "work")).To(Equal(map[string]any{
				"propagationPolicy": "SelectivelyOrphan",
				"selectivelyOrphans": map[string]any{"orphaningRules": []any{map[string]any{
					"group": "apiextensions.k8s.io", "resource": "customresourcedefinitions", "name": "foos.example.com",
				}}},
			}))
		}).Should(Succeed())
	})

	// Seed example: only cm2 is orphaned, by name.
	It("stamps SelectivelyOrphan for one ConfigMap by name, and removes the stamp when the rule goes", func() {
		fleetCluster("orph-3", nil, true)
		orphaningPolicy("by-name", v1alpha1.OrphaningRule{Name: "keep-cm2", When: "manifest.metadata.name == 'cm2'"})
		manifestWork("orph-3", "work", "gitops", manifest("v1", "ConfigMap", "default", "cm1"), manifest("v1", "ConfigMap", "default", "cm2"))
		Eventually(func(g Gomega) {
			rules, _, _ := unstructured.NestedSlice(deleteOption(g, "orph-3", "work"), "selectivelyOrphans", "orphaningRules")
			g.Expect(rules).To(Equal([]any{map[string]any{"group": "", "resource": "configmaps", "namespace": "default", "name": "cm2"}}))
		}).Should(Succeed())

		By("removing the rule")
		p := &v1alpha1.CleanupPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "by-name"}, p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.Orphaning = nil
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(deleteOption(g, "orph-3", "work")).To(BeNil())
			g.Expect(getWork(g, "orph-3", "work").GetAnnotations()).NotTo(HaveKey(v1alpha1.OrphaningAnnotation))
		}).Should(Succeed())
	})

	It("leaves a deleteOption someone else owns alone and reports the conflict", func() {
		fleetCluster("orph-4", nil, true)
		w := manifestWork("orph-4", "work", "gitops", manifest("v1", "ConfigMap", "default", "cm1"), crdManifest)
		w.SetManagedFields(nil)
		w.SetResourceVersion("")
		Expect(unstructured.SetNestedField(w.Object, map[string]any{"propagationPolicy": "Orphan"}, "spec", "deleteOption")).To(Succeed())
		Expect(k8s.Patch(ctx, w, client.Apply, client.FieldOwner("gitops"))).To(Succeed())
		orphaningPolicy("conflicting", v1alpha1.OrphaningRule{Name: "keep-crds", When: "manifest.kind == 'CustomResourceDefinition'"})
		Eventually(func() string { return strings.Join(events("work"), "\n") }).Should(ContainSubstring("Conflict: left alone"))
		Expect(deleteOption(Default, "orph-4", "work")).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
		Eventually(func(g Gomega) {
			p := status("conflicting")(g)
			g.Expect(p.Status.Conflicts).To(BeEquivalentTo(1))
			g.Expect(p.Status.WorksStamped).To(BeZero())
		}).Should(Succeed())
	})

	It("does not stamp a work whose rule fails at run time, and stamps the others", func() {
		fleetCluster("orph-5", nil, true)
		orphaningPolicy("fragile", v1alpha1.OrphaningRule{Name: "by-label", When: "manifest.metadata.labels['keep'] == 'yes'"})
		labelled := manifest("v1", "ConfigMap", "default", "cm1")
		labelled["metadata"].(map[string]any)["labels"] = map[string]any{"keep": "yes"}
		manifestWork("orph-5", "good", "gitops", labelled)
		manifestWork("orph-5", "bad", "gitops", manifest("v1", "ConfigMap", "default", "cm2"))
		Eventually(func(g Gomega) {
			g.Expect(deleteOption(g, "orph-5", "good")).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
		}).Should(Succeed())
		Eventually(func() string { return strings.Join(events("bad"), "\n") }).Should(ContainSubstring("spec.orphaning[0].when"))
		Expect(deleteOption(Default, "orph-5", "bad")).To(BeNil())
	})

	It("keeps both owners' fields when another manager applies the work again with kubectl", func() {
		fleetCluster("orph-6", nil, true)
		orphaningPolicy("ssa", v1alpha1.OrphaningRule{Name: "keep-all", When: "true"})
		dir := GinkgoT().TempDir()
		file := filepath.Join(dir, "work.yaml")
		Expect(os.WriteFile(file, []byte(`apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata: {name: work, namespace: orph-6, labels: {app: shop}}
spec:
  workload:
    manifests:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: cm1, namespace: default}}
`), 0o600)).To(Succeed())
		kubectl := func() {
			out, err := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", env.Kubeconfig,
				"apply", "--server-side", "--field-manager=argocd", "-f", file).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
		}
		kubectl()
		Eventually(func(g Gomega) {
			g.Expect(deleteOption(g, "orph-6", "work")).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
		}).Should(Succeed())
		kubectl()
		w := getWork(Default, "orph-6", "work")
		Expect(w.GetLabels()).To(HaveKeyWithValue("app", "shop"))
		opt, _, _ := unstructured.NestedMap(w.Object, "spec", "deleteOption")
		Expect(opt).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
		var managers []string
		for _, m := range w.GetManagedFields() {
			managers = append(managers, m.Manager)
		}
		Expect(managers).To(ContainElements("argocd", v1alpha1.FieldManager))
	})

	It("stops re-applying a decision another controller keeps reverting, and reports it as contested", func() {
		fleetCluster("orph-7", nil, true)
		orphaningPolicy("war", v1alpha1.OrphaningRule{Name: "keep-all", When: "true"})
		manifestWork("orph-7", "work", "replicaset-controller", manifest("v1", "ConfigMap", "default", "cm1"))
		reverts := 0
		Eventually(func(g Gomega) {
			// The other controller replaces the work's spec without the operator's deleteOption.
			w := getWork(g, "orph-7", "work")
			if _, has, _ := unstructured.NestedMap(w.Object, "spec", "deleteOption"); has {
				unstructured.RemoveNestedField(w.Object, "spec", "deleteOption")
				if k8s.Update(ctx, w, client.FieldOwner("replicaset-controller")) == nil {
					reverts++
				}
			}
			g.Expect(strings.Join(events("work"), "\n")).To(ContainSubstring("Contested"))
		}).Should(Succeed())
		Expect(reverts).To(BeNumerically("<=", 5))
		Eventually(func(g Gomega) {
			g.Expect(status("war")(g).Status.Contested).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Consistently(func(g Gomega) map[string]any { return deleteOption(g, "orph-7", "work") }, "2s").Should(BeNil())
	})

	It("uses the resource names the work agent reported, and does not guess unknown kinds", func() {
		fleetCluster("orph-8", nil, true)
		orphaningPolicy("widgets", v1alpha1.OrphaningRule{Name: "keep-widgets", When: "manifest.kind == 'Widget'"})
		widget := manifest("example.com/v1", "Widget", "default", "w1")
		manifestWork("orph-8", "unknown", "gitops", widget, manifest("v1", "ConfigMap", "default", "cm1"))
		Eventually(func() string { return strings.Join(events("unknown"), "\n") }).
			Should(ContainSubstring("neither the work agent nor the API server knows its resource"))
		Expect(deleteOption(Default, "orph-8", "unknown")).To(BeNil())

		By("reading the name from the status the agent reports")
		// The test agent writes the status too: retry on its conflicts.
		Eventually(func(g Gomega) {
			w := getWork(g, "orph-8", "unknown")
			g.Expect(unstructured.SetNestedSlice(w.Object, []any{map[string]any{
				"resourceMeta": map[string]any{"ordinal": int64(0), "group": "example.com", "version": "v1", "kind": "Widget",
					"resource": "widgets", "name": "w1", "namespace": "default"},
				"conditions": []any{},
			}}, "status", "resourceStatus", "manifests")).To(Succeed())
			g.Expect(k8s.Status().Update(ctx, w)).To(Succeed())
		}).Should(Succeed())
		// A status update alone does not trigger the work: touch a label as the agent's next apply would.
		Expect(k8s.Patch(ctx, getWork(Default, "orph-8", "unknown"),
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			rules, _, _ := unstructured.NestedSlice(deleteOption(g, "orph-8", "unknown"), "selectivelyOrphans", "orphaningRules")
			g.Expect(rules).To(Equal([]any{map[string]any{"group": "example.com", "resource": "widgets", "namespace": "default", "name": "w1"}}))
		}).Should(Succeed())
	})

	It("never recreates a work deleted before its stamp is applied", func() {
		fleetCluster("orph-10", nil, true)
		w := manifestWork("orph-10", "gone", "gitops", manifest("v1", "ConfigMap", "default", "cm1"))
		uid := w.GetUID()
		Expect(k8s.Delete(ctx, w)).To(Succeed())
		// What the adapter applies, with the UID of the work it read.
		stamp := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "gone", "namespace": "orph-10", "uid": string(uid)},
			"spec":     map[string]any{"deleteOption": map[string]any{"propagationPolicy": "Orphan"}},
		}}
		Expect(k8s.Patch(ctx, stamp, client.Apply, client.FieldOwner(v1alpha1.FieldManager))).NotTo(Succeed())
		Expect(objectGone("ManifestWork", "orph-10", "gone")()).To(BeTrue())
	})

	It("reports the decision in dry run and writes nothing, and stops counting a work once it is being deleted", func() {
		fleetCluster("orph-9", nil, true)
		Expect(k8s.Create(ctx, cleanupPolicy("dry", v1alpha1.CleanupPolicySpec{
			DryRun:    true,
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-all", When: "true"}},
		}))).To(Succeed())
		manifestWork("orph-9", "work", "gitops", manifest("v1", "ConfigMap", "default", "cm1"))
		work("orph-9", "held", nil) // with the agent's finalizer
		Eventually(func() string { return strings.Join(events("work"), "\n") }).Should(ContainSubstring("dry run: would set spec.deleteOption Orphan"))
		Expect(deleteOption(Default, "orph-9", "work")).To(BeNil())
		Eventually(func(g Gomega) {
			g.Expect(status("dry")(g).Status.DryRunPending).To(BeEquivalentTo(2))
		}).Should(Succeed())

		// A work being deleted no longer counts, though its agent holds it:
		// the update that marks its deletion forgets it.
		agent.setStuck("orph-9", "held", true)
		Expect(k8s.Delete(ctx, getWork(Default, "orph-9", "held"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(status("dry")(g).Status.DryRunPending).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Expect(getWork(Default, "orph-9", "held").GetDeletionTimestamp()).NotTo(BeNil())

		// Nor does a deleted one: its delete event forgets it.
		Expect(k8s.Delete(ctx, getWork(Default, "orph-9", "work"))).To(Succeed())
		Eventually(objectGone("ManifestWork", "orph-9", "work")).Should(BeTrue())
		Eventually(func(g Gomega) {
			g.Expect(status("dry")(g).Status.DryRunPending).To(BeEquivalentTo(0))
		}).Should(Succeed())
		agent.setStuck("orph-9", "held", false)
		Eventually(objectGone("ManifestWork", "orph-9", "held")).Should(BeTrue())
	})
})
