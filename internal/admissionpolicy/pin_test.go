package admissionpolicy_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// pinOperator is the user the protection policies are rendered for in the
// pin tests: not a member of system:masters, so that it passes only as the
// operator.
const pinOperator = "pin-operator"

var clusterRights = rbacv1.PolicyRule{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"},
	Verbs: []string{"get", "list", "create", "patch", "update"}}

// pinned returns the refusal of a change of the pin from old to pin.
func pinned(cluster, old, pin string) string {
	return fmt.Sprintf("ManagedCluster %s: only the cleanup operator sets, changes or removes the annotation %s (%s to %s): "+
		"the operator writes it", cluster, v1alpha1.GoverningPolicyAnnotation, old, pin)
}

func pinPatch(pin string) string {
	if pin == "" {
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.GoverningPolicyAnnotation)
	}
	return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.GoverningPolicyAnnotation, pin)
}

// ensurePinGuard puts every admission object in force with the protection
// policies rendered for pinOperator, and waits until the API server
// enforces them: user is refused a re-pin of mc, operator is not.
func ensurePinGuard(ctx context.Context, t *testing.T, user, operator client.Client, mc *unstructured.Unstructured) {
	t.Helper()
	g := NewWithT(t)
	for _, obj := range admissionpolicy.ProtectionObjects(pinOperator) {
		g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj))).To(Succeed())
	}
	g.Expect(admissionpolicy.EnsureObjects(ctx, k8s, admissionpolicy.AllObjects(pinOperator))).To(Succeed())
	t.Cleanup(func() {
		for _, obj := range admissionpolicy.ProtectionObjects(pinOperator) {
			_ = k8s.Delete(context.Background(), obj)
		}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(mergePatch(ctx, user, mc.DeepCopy(), pinPatch("enforced"), client.DryRunAll)).To(
			MatchError(ContainSubstring(pinned(mc.GetName(), "fleet", "enforced"))))
		g.Expect(mergePatch(ctx, operator, mc.DeepCopy(), pinPatch("enforced"), client.DryRunAll)).To(Succeed())
	}).WithTimeout(enforcementTimeout).Should(Succeed())
}

// TestPinOnlyByOperator: a user who may create, patch and update
// ManagedClusters, but is not the operator, cannot set, change or remove
// the pin to the governing policy, nor create a cluster that carries one,
// also while the cluster is being deleted; everything else of the cluster
// stays theirs to change. The operator's user can do each.
func TestPinOnlyByOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	user := userClient(ctx, t, "pin-patcher", []rbacv1.PolicyRule{clusterRights})
	operator := userClient(ctx, t, pinOperator, []rbacv1.PolicyRule{clusterRights})
	mc := createCluster(ctx, t, managedCluster("pin-a", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet"}))
	ensurePinGuard(ctx, t, user, operator, mc)

	g.Expect(mergePatch(ctx, user, mc.DeepCopy(), pinPatch("other"))).To(MatchError(ContainSubstring(pinned("pin-a", "fleet", "other"))))
	err := mergePatch(ctx, user, mc.DeepCopy(), pinPatch(""))
	g.Expect(err).To(MatchError(ContainSubstring(pinned("pin-a", "fleet", "none"))))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	// A full update that drops the annotation removes it too.
	dropped := mc.DeepCopy()
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), dropped)).To(Succeed())
	dropped.SetAnnotations(nil)
	g.Expect(user.Update(ctx, dropped)).To(MatchError(ContainSubstring(pinned("pin-a", "fleet", "none"))))
	// Anything else changes freely while the pin stays.
	g.Expect(mergePatch(ctx, user, mc.DeepCopy(), `{"metadata":{"labels":{"env":"prod"},"annotations":{"example.com/note":"x"}}}`)).To(Succeed())

	free := createCluster(ctx, t, managedCluster("pin-free", nil, nil))
	g.Expect(mergePatch(ctx, user, free.DeepCopy(), pinPatch("fleet"))).To(MatchError(ContainSubstring(pinned("pin-free", "none", "fleet"))))
	created := managedCluster("pin-created", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet"})
	g.Expect(user.Create(ctx, created.DeepCopy())).To(MatchError(ContainSubstring(pinned("pin-created", "none", "fleet"))))
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(created), created.DeepCopy()))).To(BeTrue())
	plain := managedCluster("pin-plain", nil, map[string]string{"example.com/note": "x"})
	g.Expect(user.Create(ctx, plain)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), plain) })

	// A cluster being deleted: it stays pinned to the policy the operator wrote.
	deleting := managedCluster("pin-deleting", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet"})
	deleting.SetFinalizers([]string{v1alpha1.ClusterCleanupFinalizer})
	createCluster(ctx, t, deleting)
	t.Cleanup(func() {
		_ = mergePatch(context.Background(), k8s, deleting.DeepCopy(), `{"metadata":{"finalizers":null}}`)
	})
	g.Expect(k8s.Delete(ctx, deleting.DeepCopy())).To(Succeed())
	g.Expect(mergePatch(ctx, user, deleting.DeepCopy(), pinPatch("suspended"))).To(
		MatchError(ContainSubstring(pinned("pin-deleting", "fleet", "suspended"))))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(deleting), deleting)).To(Succeed())
	g.Expect(deleting.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "fleet"))

	// The operator writes it: sets, changes, removes, and creates with it.
	g.Expect(mergePatch(ctx, operator, free.DeepCopy(), pinPatch("fleet"))).To(Succeed())
	g.Expect(mergePatch(ctx, operator, mc.DeepCopy(), pinPatch("other"))).To(Succeed())
	g.Expect(mergePatch(ctx, operator, mc.DeepCopy(), pinPatch(""))).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.GoverningPolicyAnnotation))
	g.Expect(operator.Create(ctx, created)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), created) })
}

// TestReleaseTwoStepRefused: the administrator of another policy cannot
// release a teardown the governing policy's blast radius holds by moving
// the pin to their own policy first and releasing second: the move is
// refused, the cluster stays pinned, and the release is refused as theirs
// is not the governing policy.
func TestReleaseTwoStepRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	otherAdmin := userClient(ctx, t, "pin-other-admin", []rbacv1.PolicyRule{clusterRights,
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cleanuppolicies/" + admissionpolicy.ReleaseSubresource},
			ResourceNames: []string{"other"}, Verbs: []string{admissionpolicy.ReleaseVerb}}})
	operator := userClient(ctx, t, pinOperator, []rbacv1.PolicyRule{clusterRights})
	mc := createCluster(ctx, t, managedCluster("pin-release", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet"}))
	ensurePinGuard(ctx, t, otherAdmin, operator, mc)
	mc = beingDeleted(ctx, t, mc)

	g.Expect(mergePatch(ctx, otherAdmin, mc.DeepCopy(), pinPatch("other"))).To(
		MatchError(ContainSubstring(pinned("pin-release", "fleet", "other"))))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "fleet"))
	g.Expect(mergePatch(ctx, otherAdmin, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"1/2026-01-01T00:00:00Z"}}}`,
		v1alpha1.BlastRadiusReleasedAnnotation))).To(MatchError(ContainSubstring(
		"ManagedCluster pin-release: the requesting user may not update cleanuppolicies/release of CleanupPolicy fleet")))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.BlastRadiusReleasedAnnotation))
}
