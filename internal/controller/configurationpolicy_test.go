package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// configurationPolicy creates a ConfigurationPolicy as fieldManager.
func configurationPolicy(namespace, name, action string, labels map[string]string, edit func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"remediationAction": action, "severity": "low",
			"object-templates": []any{map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
			}}},
		},
	}}
	u.SetLabels(labels)
	if edit != nil {
		edit(u)
	}
	Expect(k8s.Patch(ctx, u, client.Apply, client.FieldOwner("gitops"))).To(Succeed())
	return u
}

func pruneOf(g Gomega, namespace, name string) string {
	b, _, _ := unstructured.NestedString(getConfigurationPolicy(g, namespace, name).Object, "spec", "pruneObjectBehavior")
	return b
}

func getConfigurationPolicy(g Gomega, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("policy.open-cluster-management.io/v1")
	u.SetKind("ConfigurationPolicy")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)).To(Succeed())
	return u
}

// ownedByOperator reports whether the operator owns any field of the object.
func ownedByOperator(u *unstructured.Unstructured) bool {
	for _, m := range u.GetManagedFields() {
		if m.Manager == v1alpha1.FieldManager {
			return true
		}
	}
	return false
}

// The contract's example prune rules.
var examplePrune = &v1alpha1.Prune{Default: v1alpha1.PruneNone, Rules: []v1alpha1.PruneRule{
	{When: "policy.metadata.labels[?'cleanup'].orValue('') == 'strict'", Behavior: v1alpha1.PruneDeleteAll},
	{When: "policy.spec.remediationAction.lowerAscii() == 'enforce'", Behavior: v1alpha1.PruneDeleteIfCreated},
}}

var _ = Describe("Prune behaviour on ConfigurationPolicies", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("stamps standalone ConfigurationPolicies by the policy that selects every cluster", func() {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "standalone-1"}})).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("fleet-wide", v1alpha1.CleanupPolicySpec{Prune: examplePrune}))).To(Succeed())
		// A policy with a selector governs no standalone namespace, whatever its priority.
		Expect(k8s.Create(ctx, cleanupPolicy("selective", v1alpha1.CleanupPolicySpec{
			Priority: 50, ClusterSelector: "true",
			Prune: &v1alpha1.Prune{Default: v1alpha1.PruneDeleteAll},
		}))).To(Succeed())
		configurationPolicy("standalone-1", "strict", "inform", map[string]string{"cleanup": "strict"}, nil)
		configurationPolicy("standalone-1", "enforced", "Enforce", nil, nil)
		configurationPolicy("standalone-1", "audit", "inform", nil, nil)

		Eventually(func(g Gomega) {
			g.Expect(pruneOf(g, "standalone-1", "strict")).To(Equal("DeleteAll"))
			g.Expect(pruneOf(g, "standalone-1", "enforced")).To(Equal("DeleteIfCreated"))
			g.Expect(pruneOf(g, "standalone-1", "audit")).To(Equal("None"))
		}).Should(Succeed())
		Eventually(func() string { return strings.Join(events("strict"), "\n") }).
			Should(ContainSubstring("Ineffective: pruneObjectBehavior DeleteAll has no effect while remediationAction is inform"))

		Eventually(func(g Gomega) {
			g.Expect(status("fleet-wide")(g).Status.PoliciesStamped).To(BeEquivalentTo(3))
			g.Expect(status("selective")(g).Status.PoliciesStamped).To(BeZero())
		}).Should(Succeed())

		By("writing nothing more while nothing changes")
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("policy.open-cluster-management.io/v1")
		u.SetKind("ConfigurationPolicy")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "standalone-1", Name: "enforced"}, u)).To(Succeed())
		rv := u.GetResourceVersion()
		Consistently(func(g Gomega) string {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "standalone-1", Name: "enforced"}, u)).To(Succeed())
			return u.GetResourceVersion()
		}, "2s").Should(Equal(rv))
	})

	It("decides a cluster's ConfigurationPolicies with the cluster's policy and labels", func() {
		fleetCluster("cp-prod", map[string]string{"env": "prod"}, true)
		Expect(k8s.Create(ctx, cleanupPolicy("prod-prune", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
			Prune: &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{
				{When: "cluster != null && cluster.metadata.labels[?'env'].orValue('') == 'prod'", Behavior: v1alpha1.PruneDeleteIfCreated},
			}},
		}))).To(Succeed())
		configurationPolicy("cp-prod", "cp", "enforce", nil, nil)
		Eventually(func(g Gomega) string { return pruneOf(g, "cp-prod", "cp") }).Should(Equal("DeleteIfCreated"))

		By("giving the field up when the policy stops deciding it")
		p := &v1alpha1.CleanupPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "prod-prune"}, p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.Prune = nil
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		// The CRD defaults the field to None once nobody sets it.
		Eventually(func(g Gomega) {
			u := getConfigurationPolicy(g, "cp-prod", "cp")
			g.Expect(ownedByOperator(u)).To(BeFalse())
			g.Expect(u.GetAnnotations()).NotTo(HaveKey(v1alpha1.PruneAnnotation))
			g.Expect(pruneOf(g, "cp-prod", "cp")).To(Equal("None"))
		}).Should(Succeed())
	})

	It("never writes a ConfigurationPolicy that comes from an OCM Policy, nor one another manager decides", func() {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "standalone-2"}})).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("all-delete", v1alpha1.CleanupPolicySpec{Prune: &v1alpha1.Prune{Default: v1alpha1.PruneDeleteAll}}))).To(Succeed())
		configurationPolicy("standalone-2", "from-policy", "enforce", nil, func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{
				APIVersion: "policy.open-cluster-management.io/v1", Kind: "Policy", Name: "root.policy", UID: "11111111-2222-3333-4444-555555555555",
			}})
		})
		configurationPolicy("standalone-2", "theirs", "enforce", nil, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "None", "spec", "pruneObjectBehavior")
		})
		configurationPolicy("standalone-2", "mine", "enforce", nil, nil)
		Eventually(func(g Gomega) string { return pruneOf(g, "standalone-2", "mine") }).Should(Equal("DeleteAll"))
		Eventually(func() string { return strings.Join(events("theirs"), "\n") }).Should(ContainSubstring("Conflict: left alone"))
		Expect(pruneOf(Default, "standalone-2", "theirs")).To(Equal("None"))
		Consistently(func(g Gomega) bool {
			return ownedByOperator(getConfigurationPolicy(g, "standalone-2", "from-policy"))
		}, "2s").Should(BeFalse())
	})
})
