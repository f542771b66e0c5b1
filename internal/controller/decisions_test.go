package controller_test

import (
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/stamp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// readsDecisions is the hub template the contract gives for a template named name.
func readsDecisions(name string) string {
	return `{{hub fromConfigMap .PolicyMetadata.namespace "cleanup-decisions" (printf "%s.%s" .ManagedClusterName "` + name + `") | default "None" hub}}`
}

func cpTemplate(name, action string, labels map[string]any, prune string) map[string]any {
	md := map[string]any{"name": name}
	if labels != nil {
		md["labels"] = labels
	}
	spec := map[string]any{"remediationAction": action, "severity": "low", "object-templates": []any{}}
	if prune != "" {
		spec["pruneObjectBehavior"] = prune
	}
	return map[string]any{"objectDefinition": map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "metadata": md, "spec": spec,
	}}
}

// rootPolicy creates a root Policy, and the replicated Policies the
// propagator would create in the clusters it is placed on.
func rootPolicy(namespace, name string, templates []map[string]any, clusters ...string) *unstructured.Unstructured {
	list := make([]any, len(templates))
	for i, t := range templates {
		list[i] = t
	}
	root := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"disabled": false, "policy-templates": list},
	}}
	Expect(k8s.Create(ctx, root)).To(Succeed())
	for _, c := range clusters {
		replicated := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
			"metadata": map[string]any{"name": namespace + "." + name, "namespace": c, "labels": map[string]any{
				stamp.RootPolicyLabel: namespace + "." + name, stamp.ClusterNameLabel: c,
			}},
			"spec": map[string]any{"disabled": false, "policy-templates": list},
		}}
		Expect(k8s.Create(ctx, replicated)).To(Succeed())
	}
	return root
}

func decisions(g Gomega, namespace string) map[string]string {
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: v1alpha1.DecisionsConfigMap}, cm)).To(Succeed())
	return cm.Data
}

var _ = Describe("Prune decisions for Policy templates", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("publishes one key per cluster and template, updates exactly the affected keys, and never writes a Policy", func() {
		fleetCluster("tpl-a", map[string]string{"env": "prod"}, true)
		fleetCluster("tpl-b", map[string]string{"env": "dev"}, true)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policies-1"}})).To(Succeed())
		p := cleanupPolicy("templates", v1alpha1.CleanupPolicySpec{Prune: &v1alpha1.Prune{Default: v1alpha1.PruneNone, Rules: []v1alpha1.PruneRule{
			{When: "policy.metadata.labels[?'cleanup'].orValue('') == 'strict'", Behavior: v1alpha1.PruneDeleteAll},
			{When: "policy.spec.remediationAction.lowerAscii() == 'enforce'", Behavior: v1alpha1.PruneDeleteIfCreated},
		}}})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		root := rootPolicy("policies-1", "baseline", []map[string]any{
			cpTemplate("strict-cp", "enforce", map[string]any{"cleanup": "strict"}, readsDecisions("strict-cp")),
			cpTemplate("enforce-cp", "enforce", nil, readsDecisions("enforce-cp")),
		}, "tpl-a", "tpl-b")
		rv := root.GetResourceVersion()

		Eventually(func(g Gomega) {
			g.Expect(decisions(g, "policies-1")).To(Equal(map[string]string{
				"tpl-a.strict-cp": "DeleteAll", "tpl-a.enforce-cp": "DeleteIfCreated",
				"tpl-b.strict-cp": "DeleteAll", "tpl-b.enforce-cp": "DeleteIfCreated",
			}))
		}).Should(Succeed())

		By("changing a rule so that it decides differently on one cluster")
		before := p.DeepCopy()
		p.Spec.Prune.Rules[1].When = "cluster.metadata.labels[?'env'].orValue('') == 'prod' && policy.spec.remediationAction.lowerAscii() == 'enforce'"
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(decisions(g, "policies-1")).To(Equal(map[string]string{
				"tpl-a.strict-cp": "DeleteAll", "tpl-a.enforce-cp": "DeleteIfCreated",
				"tpl-b.strict-cp": "DeleteAll", "tpl-b.enforce-cp": "None",
			}))
		}).Should(Succeed())

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(root), root)).To(Succeed())
		Expect(root.GetResourceVersion()).To(Equal(rv), "the root Policy was written")
	})

	It("creates the ConfigMap as soon as a root Policy has templates, keeps it while one does, and reports templates that do not read it", func() {
		fleetCluster("tpl-c", nil, true)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policies-2"}})).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("tpl", v1alpha1.CleanupPolicySpec{Prune: &v1alpha1.Prune{Default: v1alpha1.PruneDeleteAll}}))).To(Succeed())
		// Not placed anywhere yet: the ConfigMap must exist already, for the
		// propagator to resolve the hub template once it places the Policy.
		first := rootPolicy("policies-2", "first", []map[string]any{cpTemplate("hardcoded", "enforce", nil, "None")})
		Eventually(func(g Gomega) map[string]string { return decisions(g, "policies-2") }).Should(BeEmpty())
		Eventually(func() string { return strings.Join(events("first"), "\n") }).
			Should(ContainSubstring("DecisionNotRead: ConfigurationPolicy template(s) hardcoded do not read pruneObjectBehavior"))

		By("placing the root Policies")
		replicated := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
			"metadata": map[string]any{"name": "policies-2.first", "namespace": "tpl-c", "labels": map[string]any{
				stamp.RootPolicyLabel: "policies-2.first", stamp.ClusterNameLabel: "tpl-c",
			}},
			"spec": map[string]any{"disabled": false, "policy-templates": []any{cpTemplate("hardcoded", "enforce", nil, "None")}},
		}}
		Expect(k8s.Create(ctx, replicated)).To(Succeed())
		rootPolicy("policies-2", "second", []map[string]any{cpTemplate("reads", "enforce", nil, readsDecisions("reads"))}, "tpl-c")
		Eventually(func(g Gomega) map[string]string { return decisions(g, "policies-2") }).
			Should(Equal(map[string]string{"tpl-c.reads": "DeleteAll", "tpl-c.hardcoded": "DeleteAll"}))
		Eventually(func(g Gomega) {
			g.Expect(status("tpl")(g).Status.TemplatesNotReadingDecisions).To(BeEquivalentTo(1))
		}).Should(Succeed())

		By("keeping the ConfigMap while a root Policy with templates remains")
		Expect(k8s.Delete(ctx, first)).To(Succeed())
		Expect(k8s.Delete(ctx, replicated)).To(Succeed())
		Eventually(func(g Gomega) map[string]string { return decisions(g, "policies-2") }).
			Should(Equal(map[string]string{"tpl-c.reads": "DeleteAll"}))
		Eventually(func(g Gomega) {
			g.Expect(status("tpl")(g).Status.TemplatesNotReadingDecisions).To(BeZero())
		}).Should(Succeed())
		Consistently(func(g Gomega) map[string]string { return decisions(g, "policies-2") }, "2s").
			Should(Equal(map[string]string{"tpl-c.reads": "DeleteAll"}))

		By("recreating it if someone deletes it")
		Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "policies-2", Name: v1alpha1.DecisionsConfigMap}})).To(Succeed())
		Eventually(func(g Gomega) map[string]string { return decisions(g, "policies-2") }).
			Should(Equal(map[string]string{"tpl-c.reads": "DeleteAll"}))
	})
})
