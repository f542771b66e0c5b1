package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// TestPlanShowsAddonHold: a cluster whose policy orphans a manifest of an
// add-on's work is deleted; the operator holds its teardown rather than
// write the add-on's deleteOption, and kubectl cleanup plan says which
// add-on, and the annotation that keeps the manifest instead.
func TestPlanShowsAddonHold(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, c := hubWithAdminOperator(ctx, t)

	g.Expect(createCluster(ctx, c, "c1")).To(Succeed())
	g.Expect(setAvailable(ctx, c, "c1")).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1",
		Labels: map[string]string{clusterv1.ClusterNameLabelKey: "c1"}}})).To(Succeed())
	settings := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	raw, err := json.Marshal(settings)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "addon-search-deploy",
			Labels: map[string]string{addonv1alpha1.AddonLabelKey: "search"}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: raw}}}}},
	})).To(Succeed())
	g.Expect(c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "keep-settings"},
		Spec: v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
			Orphaning:      []v1alpha1.OrphaningRule{{Name: "keep-settings", When: "manifest.metadata.name == 'settings'"}},
		}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "c1"})
		g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "c1"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "c1"})
		conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", v1alpha1.ContentDeleteSuccessCondition),
			HaveKeyWithValue("message", ContainSubstring("belongs to add-on search")))))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	out, err := kubectlCleanup(t, env.Kubeconfig, "plan", "c1")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("hold: manifestworks/addon-search-deploy belongs to add-on search"), out)
	g.Expect(out).To(ContainSubstring("the policy requires Orphan"), out)
	g.Expect(out).To(ContainSubstring("annotate each "+addonv1alpha1.DeletionOrphanAnnotationKey), out)
	// The works' summary says the decision is not written, not that it is.
	g.Expect(out).To(MatchRegexp(`addon-search-deploy\s+the policy's decision is not written \(held\)`), out)
	g.Expect(out).NotTo(MatchRegexp(`addon-search-deploy\s+everything: Orphan`), out)
	out, err = kubectlCleanup(t, env.Kubeconfig, "plan", "c1", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("manifestworks/addon-search-deploy belongs to add-on search"), out)
	g.Expect(out).To(ContainSubstring(addonv1alpha1.DeletionOrphanAnnotationKey), out)
	g.Expect(out).To(ContainSubstring(`"unreachable": "manifestworks/addon-search-deploy belongs to add-on search`), out)
}
