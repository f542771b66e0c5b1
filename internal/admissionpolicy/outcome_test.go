package admissionpolicy_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// TestOutcomeOnlyByOperator: a user who may create, patch and update
// ManagedClusters cannot set, change or remove the annotations that record
// what a teardown forced or deleted unconfirmed (so as to hide an
// unconfirmed orphan from the record, or report a forced teardown as
// complete), nor create a cluster that carries one; the operator can.
func TestOutcomeOnlyByOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	user := userClient(ctx, t, "outcome-patcher", []rbacv1.PolicyRule{clusterRights})
	operator := userClient(ctx, t, pinOperator, []rbacv1.PolicyRule{clusterRights})
	mc := createCluster(ctx, t, managedCluster("outcome-a", nil, map[string]string{
		v1alpha1.GoverningPolicyAnnotation: "fleet", v1alpha1.UnconfirmedOrphansAnnotation: "app"}))
	ensurePinGuard(ctx, t, user, operator, mc)

	patch := func(key, value string) string {
		if value == "" {
			return fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, key)
		}
		return fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	}
	refused := func(err error, key string) {
		t.Helper()
		g.Expect(err).To(MatchError(ContainSubstring("ManagedCluster %s: only the cleanup operator sets, changes or removes the annotation %s", "outcome-a", key)))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	}
	for _, key := range admissionpolicy.OutcomeAnnotations {
		refused(mergePatch(ctx, user, mc.DeepCopy(), patch(key, "forged")), key)
	}
	refused(mergePatch(ctx, user, mc.DeepCopy(), patch(v1alpha1.UnconfirmedOrphansAnnotation, "")), v1alpha1.UnconfirmedOrphansAnnotation)
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.UnconfirmedOrphansAnnotation, "app"))
	g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.ForcedObjectsAnnotation))
	// Anything else changes freely while they stay.
	g.Expect(mergePatch(ctx, user, mc.DeepCopy(), patch("example.com/note", "x"))).To(Succeed())

	created := managedCluster("outcome-created", nil, map[string]string{v1alpha1.ForcedObjectsAnnotation: "0"})
	g.Expect(user.Create(ctx, created.DeepCopy())).To(MatchError(ContainSubstring("only the cleanup operator sets, changes or removes the annotation " + v1alpha1.ForcedObjectsAnnotation)))

	// The operator writes them.
	g.Expect(mergePatch(ctx, operator, mc.DeepCopy(), patch(v1alpha1.ForcingAnnotation, "manifestworks/app"))).To(Succeed())
	g.Expect(mergePatch(ctx, operator, mc.DeepCopy(), patch(v1alpha1.UnconfirmedOrphansAnnotation, ""))).To(Succeed())
	g.Expect(operator.Create(ctx, created)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), created) })
}

// TestTeardownFinalizerOnlyByOperator: a user who may patch ManagedClusters
// cannot end a teardown by removing the operator's finalizer from a cluster
// being deleted (its hooks, budget, orphaning and record would be skipped);
// they may from a live cluster, where the operator puts it back; the
// operator removes it when its teardown ends.
func TestTeardownFinalizerOnlyByOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	user := userClient(ctx, t, "finalizer-patcher", []rbacv1.PolicyRule{clusterRights})
	operator := userClient(ctx, t, pinOperator, []rbacv1.PolicyRule{clusterRights})
	deleting := managedCluster("finalizer-deleting", nil, map[string]string{v1alpha1.GoverningPolicyAnnotation: "fleet"})
	deleting.SetFinalizers([]string{v1alpha1.ClusterCleanupFinalizer, "example.com/other"})
	createCluster(ctx, t, deleting)
	t.Cleanup(func() {
		_ = mergePatch(context.Background(), k8s, deleting.DeepCopy(), `{"metadata":{"finalizers":null}}`)
	})
	ensurePinGuard(ctx, t, user, operator, deleting)
	live := managedCluster("finalizer-live", nil, nil)
	live.SetFinalizers([]string{v1alpha1.ClusterCleanupFinalizer})
	createCluster(ctx, t, live)
	g.Expect(k8s.Delete(ctx, deleting.DeepCopy())).To(Succeed())

	err := mergePatch(ctx, user, deleting.DeepCopy(), `{"metadata":{"finalizers":["example.com/other"]}}`)
	g.Expect(err).To(MatchError(ContainSubstring("ManagedCluster finalizer-deleting: only the cleanup operator removes the finalizer " +
		v1alpha1.ClusterCleanupFinalizer + " from a cluster being deleted")))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(deleting), deleting)).To(Succeed())
	g.Expect(deleting.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
	// Another finalizer goes freely while the operator's stays.
	g.Expect(mergePatch(ctx, user, deleting.DeepCopy(), fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, v1alpha1.ClusterCleanupFinalizer))).To(Succeed())
	// On a live cluster it is the user's to remove.
	g.Expect(mergePatch(ctx, user, live.DeepCopy(), `{"metadata":{"finalizers":null}}`)).To(Succeed())

	g.Expect(mergePatch(ctx, operator, deleting.DeepCopy(), `{"metadata":{"finalizers":null}}`)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(deleting), deleting.DeepCopy()))
	}).Should(BeTrue())
}
