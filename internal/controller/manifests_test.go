package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// The operator's cache keeps only the identity of each manifest of a
// ManifestWork; a rule that reads more must still decide on the manifests
// the API server stores. The rule below orphans every manifest not marked
// keep=no: on identities alone it would orphan them all (Orphan) instead of
// the unmarked ones (SelectivelyOrphan).
var _ = Describe("Orphaning rules that read manifests", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	readsData := v1alpha1.OrphaningRule{Name: "unless-marked", When: "manifest.?data.?keep.orValue('') != 'no'"}
	marked := func(name, keep string) map[string]any {
		m := manifest("v1", "ConfigMap", "default", name)
		if keep != "" {
			m["data"] = map[string]any{"keep": keep}
		}
		return m
	}
	orphanedNames := func(g Gomega, namespace, name string) []string {
		opt := deleteOption(g, namespace, name)
		g.Expect(opt).To(HaveKeyWithValue("propagationPolicy", "SelectivelyOrphan"))
		rules, _, _ := unstructured.NestedSlice(opt, "selectivelyOrphans", "orphaningRules")
		var names []string
		for _, r := range rules {
			names = append(names, r.(map[string]any)["name"].(string))
		}
		return names
	}

	It("stamps the decision the manifests' data make, and follows a new generation of the work", func() {
		fleetCluster("rm-1", nil, true)
		Expect(k8s.Create(ctx, cleanupPolicy("reads-data", v1alpha1.CleanupPolicySpec{Orphaning: []v1alpha1.OrphaningRule{readsData}}))).To(Succeed())
		manifestWork("rm-1", "work", "gitops", marked("a", "no"), marked("b", ""))
		Eventually(func(g Gomega) []string { return orphanedNames(g, "rm-1", "work") }).Should(Equal([]string{"b"}))

		By("deciding again on the manifests of the work's next generation")
		manifestWork("rm-1", "work", "gitops", marked("a", ""), marked("b", "no"))
		Eventually(func(g Gomega) []string { return orphanedNames(g, "rm-1", "work") }).Should(Equal([]string{"a"}))
	})

	It("decides on the manifests once a policy's rules start reading them", func() {
		fleetCluster("rm-2", nil, true)
		p := cleanupPolicy("starts-reading", v1alpha1.CleanupPolicySpec{Orphaning: []v1alpha1.OrphaningRule{
			{Name: "secrets", When: "manifest.kind == 'Secret'"},
		}})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		manifestWork("rm-2", "work", "gitops", marked("a", "no"), marked("b", ""))
		Eventually(func(g Gomega) {
			g.Expect(status("starts-reading")(g).Status.GovernedClusters).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Consistently(func(g Gomega) map[string]any { return deleteOption(g, "rm-2", "work") }, "1s").Should(BeNil())

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.Orphaning = []v1alpha1.OrphaningRule{readsData}
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) []string { return orphanedNames(g, "rm-2", "work") }).Should(Equal([]string{"b"}))
	})

	It("requires, in a teardown, the deleteOption the manifests' data make", func() {
		fleetCluster("rm-3", nil, true)
		agentWork("rm-3", "work", "test", marked("a", "no"), marked("b", ""))
		Expect(k8s.Create(ctx, cleanupPolicy("teardown-reads-data", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{readsData},
		}))).To(Succeed())
		governedBy("rm-3", "teardown-reads-data")
		Eventually(func(g Gomega) []string { return orphanedNames(g, "rm-3", "work") }).Should(Equal([]string{"b"}))

		deleteCluster("rm-3")
		clusterGone("rm-3")
		// Decided on identities alone, the teardown would have required
		// Orphan and stamped it before the deletion.
		Expect(agent.deletedWith("rm-3", "work")).To(Equal("SelectivelyOrphan"))
	})
})
