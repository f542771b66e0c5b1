package admissionpolicy_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// TestReleaseNeedsPolicyAdmin: setting or changing the blast-radius release
// of a ManagedCluster needs the right to release the CleanupPolicy that
// governs it. A user who may patch ManagedClusters only is refused, and so
// is the administrator of another policy, also when the same patch moves
// the cluster to that policy; the governing policy's administrator
// releases. Removing a release, or changing anything else, is not checked.
//
// The release policy is checked on its own, without the protection-mark
// policy (which refuses every move of the pin but the operator's; see
// TestReleaseTwoStepRefused): it must hold also where an administrator
// dropped that one.
func TestReleaseNeedsPolicyAdmin(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	for _, obj := range admissionpolicy.ProtectionObjects("the-operator") {
		g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed())
	}
	g.Expect(admissionpolicy.EnsureObjects(ctx, k8s, admissionpolicy.Objects())).To(Succeed())

	clusters := rbacv1.PolicyRule{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"},
		Verbs: []string{"get", "patch", "update"}}
	adminOf := func(policy string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cleanuppolicies/" + admissionpolicy.ReleaseSubresource},
			ResourceNames: []string{policy}, Verbs: []string{admissionpolicy.ReleaseVerb}}
	}
	patcher := userClient(ctx, t, "release-patcher", []rbacv1.PolicyRule{clusters})
	otherAdmin := userClient(ctx, t, "release-other-admin", []rbacv1.PolicyRule{clusters, adminOf("other")})
	fleetAdmin := userClient(ctx, t, "release-fleet-admin", []rbacv1.PolicyRule{clusters, adminOf("fleet")})
	anyAdmin := userClient(ctx, t, "release-any-admin", []rbacv1.PolicyRule{clusters,
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cleanuppolicies/" + admissionpolicy.ReleaseSubresource}, Verbs: []string{admissionpolicy.ReleaseVerb}}})

	mc := beingDeleted(ctx, t, createCluster(ctx, t, managedCluster("release-a", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet"})))
	// The protection-mark policy is no longer enforced: the pin moves.
	g.Eventually(func() error {
		return mergePatch(ctx, otherAdmin, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"other"}}}`,
			v1alpha1.GoverningPolicyAnnotation), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(Succeed())
	release := func(value string) string {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.BlastRadiusReleasedAnnotation, value)
	}
	refusal := func(policy string) string {
		return fmt.Sprintf(`ManagedCluster release-a: the requesting user may not update cleanuppolicies/release of CleanupPolicy %s (verb update, group "cleanup.fleetops.dev", `+
			`resource cleanuppolicies/release), which setting the annotation %s requires`, policy, v1alpha1.BlastRadiusReleasedAnnotation)
	}
	g.Eventually(func() error {
		return mergePatch(ctx, patcher, mc.DeepCopy(), release("1/2026-01-01T00:00:00Z"), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring(refusal("fleet"))))
	g.Expect(mergePatch(ctx, otherAdmin, mc.DeepCopy(), release("1/2026-01-01T00:00:00Z"))).To(MatchError(ContainSubstring(refusal("fleet"))))
	// Moving the cluster to a policy one administers, in the same patch.
	g.Expect(mergePatch(ctx, otherAdmin, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"other",%q:"1/2026-01-01T00:00:00Z"}}}`,
		v1alpha1.GoverningPolicyAnnotation, v1alpha1.BlastRadiusReleasedAnnotation))).To(MatchError(ContainSubstring(refusal("fleet"))))
	// ... and the other way round: from one's own policy to another.
	g.Expect(mergePatch(ctx, fleetAdmin, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"other",%q:"1/2026-01-01T00:00:00Z"}}}`,
		v1alpha1.GoverningPolicyAnnotation, v1alpha1.BlastRadiusReleasedAnnotation))).To(MatchError(ContainSubstring(refusal("other"))))

	g.Expect(mergePatch(ctx, fleetAdmin, mc.DeepCopy(), release("1/2026-01-01T00:00:00Z"))).To(Succeed())
	// Anything else changes freely while the release stays as it is.
	g.Expect(mergePatch(ctx, patcher, mc.DeepCopy(), `{"metadata":{"annotations":{"example.com/note":"x"}}}`)).To(Succeed())
	// A changed release is a new one.
	g.Expect(mergePatch(ctx, patcher, mc.DeepCopy(), release("2/2026-01-01T00:00:01Z"))).To(MatchError(ContainSubstring(refusal("fleet"))))
	// Taking it off releases nothing.
	g.Expect(mergePatch(ctx, patcher, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`,
		v1alpha1.BlastRadiusReleasedAnnotation))).To(Succeed())

	// A cluster no policy governs: the right on every policy.
	free := beingDeleted(ctx, t, createCluster(ctx, t, managedCluster("release-free", nil, nil)))
	g.Expect(mergePatch(ctx, fleetAdmin, free.DeepCopy(), release("1/2026-01-01T00:00:00Z"))).To(MatchError(ContainSubstring(
		"ManagedCluster release-free: the requesting user may not update cleanuppolicies/release of CleanupPolicy (any)")))
	g.Expect(mergePatch(ctx, anyAdmin, free.DeepCopy(), release("1/2026-01-01T00:00:00Z"))).To(Succeed())

	// A release is of a deletion under way: never written ahead of one, on
	// a live cluster whose pin may still move, nor at its creation, even by
	// a user who may release every policy.
	live := createCluster(ctx, t, managedCluster("release-live", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet"}))
	ahead := "ManagedCluster release-live: the annotation " + v1alpha1.BlastRadiusReleasedAnnotation + " releases a teardown the blast radius holds, and is written on a cluster being deleted only"
	g.Expect(mergePatch(ctx, anyAdmin, live.DeepCopy(), release("1/2099-01-01T00:00:00Z"))).To(MatchError(ContainSubstring(ahead)))
	created := managedCluster("release-created", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet",
		v1alpha1.BlastRadiusReleasedAnnotation: "1/2026-01-01T00:00:00Z"})
	creator := userClient(ctx, t, "release-creator", []rbacv1.PolicyRule{{APIGroups: []string{"cluster.open-cluster-management.io"},
		Resources: []string{"managedclusters"}, Verbs: []string{"create"}},
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cleanuppolicies/" + admissionpolicy.ReleaseSubresource}, Verbs: []string{admissionpolicy.ReleaseVerb}}})
	g.Expect(creator.Create(ctx, created.DeepCopy())).To(MatchError(ContainSubstring("ManagedCluster release-created: the annotation " +
		v1alpha1.BlastRadiusReleasedAnnotation + " releases a teardown the blast radius holds, and is written on a cluster being deleted only")))

	// Every verb on CleanupPolicies, as OLM's generated admin role grants,
	// is not the right to release.
	everyVerb := userClient(ctx, t, "release-every-verb", []rbacv1.PolicyRule{clusters,
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cleanuppolicies"}, Verbs: []string{"*"}}})
	g.Expect(mergePatch(ctx, everyVerb, mc.DeepCopy(), release("3/2026-01-01T00:00:02Z"))).To(MatchError(ContainSubstring(refusal("fleet"))))
}

// beingDeleted deletes the cluster, which a finalizer keeps until the test
// ends, and returns it as it is then.
func beingDeleted(ctx context.Context, t *testing.T, mc *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	g.Expect(mergePatch(ctx, k8s, mc.DeepCopy(), `{"metadata":{"finalizers":["example.com/hold"]}}`)).To(Succeed())
	t.Cleanup(func() { _ = mergePatch(context.Background(), k8s, mc.DeepCopy(), `{"metadata":{"finalizers":null}}`) })
	g.Expect(k8s.Delete(ctx, mc.DeepCopy())).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	return mc
}
