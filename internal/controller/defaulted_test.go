package controller_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// kubectl runs the real kubectl on the test API server as an
// administrator, with obj as its input.
func kubectl(obj *unstructured.Unstructured, args ...string) string {
	cmd := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	if obj != nil {
		raw, err := json.Marshal(obj.Object)
		Expect(err).NotTo(HaveOccurred())
		cmd.Stdin = bytes.NewReader(raw)
	}
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// creation is one of the ways people create objects.
type creation struct {
	name   string
	create func(obj *unstructured.Unstructured)
}

var (
	// clientSideApply is kubectl apply without --server-side, as Argo CD
	// syncs by default: an Update request that records what it sent in
	// the last-applied-configuration annotation.
	clientSideApply = creation{"client-side apply", func(obj *unstructured.Unstructured) {
		kubectl(obj, "apply", "-f", "-")
	}}
	serverSideApply = creation{"server-side apply", func(obj *unstructured.Unstructured) {
		kubectl(obj, "apply", "--server-side", "--field-manager", "gitops", "-f", "-")
	}}
	// plainCreate is a create request that leaves no record of what it sent.
	plainCreate = creation{"plain create", func(obj *unstructured.Unstructured) {
		kubectl(obj, "create", "-f", "-")
	}}
)

// managers lists an object's field managers with their operation.
func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		out = append(out, e.Manager+" ("+string(e.Operation)+")")
	}
	return out
}

// fieldOwners lists the managers that own the field at path, as their
// managedFields entries record it.
func fieldOwners(u *unstructured.Unstructured, path ...string) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		Expect(json.Unmarshal(e.FieldsV1.Raw, &node)).To(Succeed())
		owned := true
		for _, name := range path {
			next, ok := node["f:"+name].(map[string]any)
			if !ok {
				owned = false
				break
			}
			node = next
		}
		if owned {
			out = append(out, e.Manager)
		}
	}
	return out
}

var _ = Describe("Schema defaults nobody wrote", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("stamps pruneObjectBehavior over the CRD's default, and leaves a value someone wrote", func() {
		const ns = "defaults-cp"
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		cp := func(name string, prune string) *unstructured.Unstructured {
			spec := map[string]any{
				"remediationAction": "enforce", "severity": "low",
				"object-templates": []any{map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
				}}},
			}
			if prune != "" {
				spec["pruneObjectBehavior"] = prune
			}
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
				"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
			}}
		}
		cases := []struct {
			name    string
			how     creation
			written string // pruneObjectBehavior as the creator wrote it
			stamped bool
		}{
			{"cp-csa-default", clientSideApply, "", true},
			{"cp-csa-written", clientSideApply, "None", false},
			{"cp-ssa-default", serverSideApply, "", true},
			{"cp-ssa-written", serverSideApply, "None", false},
			{"cp-created-default", plainCreate, "", false},
		}
		for _, c := range cases {
			c.how.create(cp(c.name, c.written))
			live := getConfigurationPolicy(Default, ns, c.name)
			GinkgoWriter.Printf("%s (%s): managers %v, pruneObjectBehavior owned by %v\n", c.name, c.how.name,
				managers(live), fieldOwners(live, "spec", "pruneObjectBehavior"))
			Expect(pruneOf(Default, ns, c.name)).To(Equal("None"), "the CRD defaults pruneObjectBehavior")
		}
		// Client-side applied, then someone else wrote the field: the
		// last-applied configuration is not that writer's.
		clientSideApply.create(cp("cp-csa-then-patched", ""))
		kubectl(nil, "patch", "configurationpolicy", "-n", ns, "cp-csa-then-patched", "--type", "merge", "-p", `{"spec":{"pruneObjectBehavior":"DeleteAll"}}`)
		// Client-side applied with the operator's annotation written: the
		// conflict is not on the defaulted field alone.
		annotated := cp("cp-csa-annotated", "")
		annotated.SetAnnotations(map[string]string{v1alpha1.PruneAnnotation: "DeleteAll"})
		clientSideApply.create(annotated)

		Expect(k8s.Create(ctx, cleanupPolicy("defaults", v1alpha1.CleanupPolicySpec{
			Prune: &v1alpha1.Prune{Default: v1alpha1.PruneDeleteIfCreated},
		}))).To(Succeed())

		for _, c := range cases {
			if !c.stamped {
				continue
			}
			By(c.name + ": stamped")
			Eventually(func(g Gomega) {
				live := getConfigurationPolicy(g, ns, c.name)
				g.Expect(pruneOf(g, ns, c.name)).To(Equal("DeleteIfCreated"))
				g.Expect(fieldOwners(live, "spec", "pruneObjectBehavior")).To(Equal([]string{v1alpha1.FieldManager}))
				g.Expect(live.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.PruneAnnotation, "DeleteIfCreated"))
				g.Expect(fieldOwners(live, "metadata", "annotations", v1alpha1.PruneAnnotation)).To(Equal([]string{v1alpha1.FieldManager}))
			}).Should(Succeed())
		}
		conflicts := map[string]string{
			"cp-csa-written":      `"kubectl-client-side-apply" applied it (it is in kubectl.kubernetes.io/last-applied-configuration)`,
			"cp-ssa-written":      `"gitops" applied it with server-side apply`,
			"cp-created-default":  `"kubectl-create" set it, and no record says what it sent`,
			"cp-csa-then-patched": `"kubectl-patch" set it, and no record says what it sent`,
			"cp-csa-annotated":    `the conflict is on .metadata.annotations`,
		}
		for name, why := range conflicts {
			By(name + ": a conflict, left alone")
			Eventually(func() string { return strings.Join(events(name), "\n") }).Should(And(
				ContainSubstring("Conflict: left alone: another manager owns spec.pruneObjectBehavior, the operator would set DeleteIfCreated"),
				ContainSubstring(why)))
		}
		Eventually(func(g Gomega) {
			p := status("defaults")(g)
			// The count reads the annotation, which cp-csa-annotated carries from its creator.
			g.Expect(p.Status.PoliciesStamped).To(BeEquivalentTo(3))
			g.Expect(p.Status.Conflicts).To(BeEquivalentTo(len(conflicts)))
		}).Should(Succeed())
		for name := range conflicts {
			live := getConfigurationPolicy(Default, ns, name)
			Expect(ownedByOperator(live)).To(BeFalse(), "%s: the operator owns a field", name)
			Expect(live.GetAnnotations()[v1alpha1.PruneAnnotation]).To(Or(BeEmpty(), Equal("DeleteAll")))
		}
		Expect(pruneOf(Default, ns, "cp-csa-annotated")).To(Equal("None"))
		Expect(pruneOf(Default, ns, "cp-csa-written")).To(Equal("None"))
		Expect(pruneOf(Default, ns, "cp-csa-then-patched")).To(Equal("DeleteAll"))

		By("applying the client-side configuration again: the stamp stays")
		clientSideApply.create(cp("cp-csa-default", ""))
		Consistently(func(g Gomega) string { return pruneOf(g, ns, "cp-csa-default") }, "2s").Should(Equal("DeleteIfCreated"))
		kubectl(nil, "delete", "configurationpolicies", "-n", ns, "--all")
	})
})

var _ = Describe("Schema defaults nobody wrote, on ManifestWorks", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	// The ManifestWork CRD defaults no deleteOption; it defaults
	// deleteOption.propagationPolicy to Foreground when a creator writes a
	// deleteOption without one.
	It("stamps deleteOption over the CRD's default propagationPolicy, and leaves a value someone wrote", func() {
		const ns = "defaults-mw"
		fleetCluster(ns, nil, true)
		mw := func(name string, deleteOption map[string]any) *unstructured.Unstructured {
			spec := map[string]any{"workload": map[string]any{"manifests": []any{manifest("v1", "ConfigMap", "default", name)}}}
			if deleteOption != nil {
				spec["deleteOption"] = deleteOption
			}
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
				"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
			}}
		}
		foreground := map[string]any{"propagationPolicy": "Foreground"}
		cases := []struct {
			name    string
			how     creation
			written map[string]any // deleteOption as the creator wrote it
			stamped bool
		}{
			{"mw-csa-absent", clientSideApply, nil, true},
			{"mw-csa-default", clientSideApply, map[string]any{}, true},
			{"mw-csa-written", clientSideApply, foreground, false},
			{"mw-ssa-default", serverSideApply, map[string]any{}, true},
			{"mw-ssa-written", serverSideApply, foreground, false},
			{"mw-created-absent", plainCreate, nil, true},
			{"mw-created-default", plainCreate, map[string]any{}, false},
		}
		for _, c := range cases {
			c.how.create(mw(c.name, c.written))
			live := getWork(Default, ns, c.name)
			GinkgoWriter.Printf("%s (%s): managers %v, deleteOption.propagationPolicy owned by %v\n", c.name, c.how.name,
				managers(live), fieldOwners(live, "spec", "deleteOption", "propagationPolicy"))
			if c.written == nil {
				Expect(deleteOption(Default, ns, c.name)).To(BeNil(), "the CRD defaults no deleteOption")
			} else {
				Expect(deleteOption(Default, ns, c.name)).To(Equal(foreground), "the CRD defaults propagationPolicy")
			}
		}

		Expect(k8s.Create(ctx, cleanupPolicy("defaults-mw", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-configmaps", When: "manifest.kind == 'ConfigMap'"}},
		}))).To(Succeed())

		for _, c := range cases {
			if !c.stamped {
				continue
			}
			By(c.name + ": stamped")
			Eventually(func(g Gomega) {
				live := getWork(g, ns, c.name)
				g.Expect(deleteOption(g, ns, c.name)).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
				g.Expect(fieldOwners(live, "spec", "deleteOption", "propagationPolicy")).To(Equal([]string{v1alpha1.FieldManager}))
				g.Expect(live.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.OrphaningAnnotation, "Orphan"))
			}).Should(Succeed())
		}
		conflicts := map[string]string{
			"mw-csa-written":     `"kubectl-client-side-apply" applied it (it is in kubectl.kubernetes.io/last-applied-configuration)`,
			"mw-ssa-written":     `"gitops" applied it with server-side apply`,
			"mw-created-default": `"kubectl-create" set it, and no record says what it sent`,
		}
		for name, why := range conflicts {
			By(name + ": a conflict, left alone")
			Eventually(func() string { return strings.Join(events(name), "\n") }).Should(And(
				ContainSubstring("Conflict: left alone: another manager owns spec.deleteOption, the operator would set Orphan"),
				ContainSubstring(why)))
		}
		Eventually(func(g Gomega) {
			p := status("defaults-mw")(g)
			g.Expect(p.Status.WorksStamped).To(BeEquivalentTo(4))
			g.Expect(p.Status.Conflicts).To(BeEquivalentTo(len(conflicts)))
		}).Should(Succeed())
		for name := range conflicts {
			live := getWork(Default, ns, name)
			Expect(ownedByOperator(live)).To(BeFalse(), "%s: the operator owns a field", name)
			Expect(deleteOption(Default, ns, name)).To(Equal(foreground))
		}
		By("giving the decision up: the creators' deleteOption stays, defaulted again")
		Expect(k8s.Delete(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "defaults-mw"}})).To(Succeed())
		for _, c := range cases {
			if !c.stamped {
				continue
			}
			Eventually(func(g Gomega) {
				live := getWork(g, ns, c.name)
				g.Expect(live.GetAnnotations()).NotTo(HaveKey(v1alpha1.OrphaningAnnotation))
				if c.written == nil {
					g.Expect(deleteOption(g, ns, c.name)).To(BeNil())
					g.Expect(ownedByOperator(live)).To(BeFalse())
				} else {
					// The creator's empty deleteOption cannot be stored
					// without propagationPolicy: the operator gives the
					// CRD's default back, under its own manager.
					g.Expect(deleteOption(g, ns, c.name)).To(Equal(foreground))
				}
			}).Should(Succeed(), c.name)
		}
		kubectl(nil, "delete", "manifestworks", "-n", ns, "--all")
	})
})

var _ = Describe("Schema defaults nobody wrote, under Needless", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("orphans a work whose propagationPolicy the CRD defaulted, and holds on one someone wrote", func() {
		const ns = "defaults-nl"
		fleetCluster(ns, nil, true)
		mw := func(name string, deleteOption map[string]any) *unstructured.Unstructured {
			spec := map[string]any{"workload": map[string]any{"manifests": []any{manifest("v1", "ConfigMap", "default", name)}}}
			if deleteOption != nil {
				spec["deleteOption"] = deleteOption
			}
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
				"metadata": map[string]any{"name": name, "namespace": ns, "finalizers": []any{v1alpha1.WorkAgentFinalizer}},
				"spec":     spec,
			}}
		}
		clientSideApply.create(mw("nl-default", map[string]any{}))
		clientSideApply.create(mw("nl-written", map[string]any{"propagationPolicy": "Foreground"}))
		Expect(k8s.Create(ctx, cleanupPolicy("defaults-needless", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyNeedless},
		}))).To(Succeed())
		governedBy(ns, "defaults-needless")
		agent.setStuck(ns, "nl-default", true)
		agent.setStuck(ns, "nl-written", true)

		deleteCluster(ns)
		Eventually(func(g Gomega) {
			c := contentDelete(g, ns)
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/nl-written: another manager owns spec.deleteOption"))
			g.Expect(c.Message).NotTo(ContainSubstring("nl-default"))
			g.Expect(c.Message).To(ContainSubstring(`"kubectl-client-side-apply" applied it`))
		}).Should(Succeed())
		w := getWork(Default, ns, "nl-written")
		Expect(w.GetDeletionTimestamp()).To(BeNil())
		Expect(deleteOption(Default, ns, "nl-written")).To(Equal(map[string]any{"propagationPolicy": "Foreground"}))

		By("Git drops the field: every work is orphaned before it is deleted")
		clientSideApply.create(mw("nl-written", nil))
		for _, name := range []string{"nl-default", "nl-written"} {
			Eventually(func(g Gomega) {
				w := getWork(g, ns, name)
				g.Expect(w.GetDeletionTimestamp()).NotTo(BeNil())
				g.Expect(deleteOption(g, ns, name)).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
				g.Expect(fieldOwners(w, "spec", "deleteOption", "propagationPolicy")).To(Equal([]string{v1alpha1.FieldManager}))
			}).Should(Succeed())
			agent.setStuck(ns, name, false)
		}
		clusterGone(ns)
		Eventually(func() string { return strings.Join(events(ns), "\n") }).Should(ContainSubstring(v1alpha1.OrphanedReason))
	})
})
