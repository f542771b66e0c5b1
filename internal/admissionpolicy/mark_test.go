package admissionpolicy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// userClient is a client for a user that holds only the rules given.
func userClient(ctx context.Context, t *testing.T, name string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	g.Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, role))).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}}}
	g.Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, binding))).To(Succeed())
	u, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(u.Config(), client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch string, opts ...client.PatchOption) error {
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)), opts...)
}

// TestProtectionHoldsAgainstAPatch: a user who may patch and delete
// ManagedClusters and namespaces, but is not the operator, cannot take the
// protection mark off, cannot forge an accepted confirmation in one patch
// (nor delete the cluster after trying), and cannot delete the protected
// cluster's namespace, even after taking OCM's label off it; a
// confirmation by name alone is let through for
// the operator to stamp. Once the operator (here the test's admin, for
// whom the policies are rendered) accepts a confirmation, the namespace
// may go. The namespace of an unprotected cluster is not guarded.
func TestProtectionHoldsAgainstAPatch(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	asOperator(ctx, t)
	user := userClient(ctx, t, "cluster-patcher", []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"},
			Verbs: []string{"get", "list", "patch", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "patch", "delete"}},
	})

	const name = "guarded-a"
	mc := createCluster(ctx, t, managedCluster(name, protectedLabels, nil))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{decision.OCMClusterNameLabel: name}}}
	g.Expect(k8s.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })

	onlyOperator := "only the cleanup operator sets or removes the label " + v1alpha1.DeletionProtectedLabel
	unmark := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.DeletionProtectedLabel)
	g.Eventually(func() error {
		return mergePatch(ctx, user, mc.DeepCopy(), unmark, client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring("ManagedCluster " + name + ": " + onlyOperator)))
	g.Expect(mergePatch(ctx, user, mc.DeepCopy(), unmark)).To(MatchError(ContainSubstring(onlyOperator)))

	// The forged confirmation, in one patch: refused whole.
	past := time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	forged := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q,%q:%q}}}`, v1alpha1.DeleteConfirmedAnnotation, name,
		v1alpha1.DeleteConfirmedAtAnnotation, past, v1alpha1.DeleteConfirmationAcceptedAnnotation, past)
	g.Expect(mergePatch(ctx, user, mc.DeepCopy(), forged)).To(MatchError(ContainSubstring(
		"only the cleanup operator writes the annotation " + v1alpha1.DeleteConfirmationAcceptedAnnotation)))
	// With the mark taken off in the same patch: refused too.
	g.Expect(mergePatch(ctx, user, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:null},"annotations":{%q:%q}}}`,
		v1alpha1.DeletionProtectedLabel, v1alpha1.DeleteConfirmationAcceptedAnnotation, past))).To(MatchError(ContainSubstring(onlyOperator)))
	g.Expect(user.Delete(ctx, mc.DeepCopy())).To(MatchError(ContainSubstring("is protected from deletion")))

	// The namespace of the protected cluster cannot be deleted either.
	refusedNamespace := "namespace " + name + " belongs to ManagedCluster " + name + ", which is protected from deletion"
	g.Eventually(func() error {
		return user.Delete(ctx, ns.DeepCopy(), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring(refusedNamespace)))
	g.Expect(user.Delete(ctx, ns.DeepCopy())).To(MatchError(ContainSubstring(refusedNamespace)))
	// Nor once OCM's label is taken off it: the guard keys on the name.
	g.Expect(mergePatch(ctx, user, ns.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, decision.OCMClusterNameLabel))).To(Succeed())
	g.Expect(user.Delete(ctx, ns.DeepCopy())).To(MatchError(ContainSubstring(refusedNamespace)))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ns), ns)).To(Succeed())
	g.Expect(ns.DeletionTimestamp).To(BeNil(), "the unlabelled namespace is still there")

	// Nor while the cluster is being deleted without an accepted
	// confirmation: its teardown's holds and orphaning come first.
	held := createCluster(ctx, t, managedCluster("guarded-held", nil, nil))
	heldNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "guarded-held"}}
	g.Expect(k8s.Create(ctx, heldNS)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), heldNS) })
	g.Expect(mergePatch(ctx, k8s, held.DeepCopy(), `{"metadata":{"finalizers":["example.com/hold"]}}`)).To(Succeed())
	t.Cleanup(func() { _ = mergePatch(context.Background(), k8s, held.DeepCopy(), `{"metadata":{"finalizers":null}}`) })
	g.Expect(k8s.Delete(ctx, held.DeepCopy())).To(Succeed())
	g.Expect(mergePatch(ctx, k8s, held.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, v1alpha1.DeletionProtectedLabel))).To(Succeed())
	g.Eventually(func() error { return user.Delete(ctx, heldNS.DeepCopy(), client.DryRunAll) }).WithTimeout(enforcementTimeout).
		Should(MatchError(ContainSubstring("namespace guarded-held belongs to ManagedCluster guarded-held")))

	// A confirmation by name alone passes: the operator stamps it.
	g.Expect(mergePatch(ctx, user, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`,
		v1alpha1.DeleteConfirmedAnnotation, name))).To(Succeed())
	g.Expect(user.Delete(ctx, ns.DeepCopy(), client.DryRunAll)).To(MatchError(ContainSubstring(refusedNamespace)))
	// The operator stamps and accepts it: the namespace may go now.
	now := time.Now().UTC().Format(time.RFC3339)
	g.Expect(mergePatch(ctx, k8s, mc.DeepCopy(), fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		v1alpha1.DeleteConfirmedAtAnnotation, now, v1alpha1.DeleteConfirmationAcceptedAnnotation, now))).To(Succeed())
	g.Eventually(func() error {
		return user.Delete(ctx, ns.DeepCopy(), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(Succeed())

	// An unprotected cluster's namespace is not guarded.
	const free = "guarded-free"
	createCluster(ctx, t, managedCluster(free, nil, nil))
	freeNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: free, Labels: map[string]string{decision.OCMClusterNameLabel: free}}}
	g.Expect(k8s.Create(ctx, freeNS)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), freeNS) })
	g.Expect(user.Delete(ctx, freeNS.DeepCopy(), client.DryRunAll)).To(Succeed())
}

// TestCanRestore: a client without the bootstrap role's rights is told
// what it lacks; one with them is not.
func TestCanRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	objs := admissionpolicy.AllObjects("someone")
	why, err := admissionpolicy.CanRestore(ctx, k8s, objs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(why).To(BeEmpty())

	reader := userClient(ctx, t, "policy-reader", []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "list", "watch"}}})
	why, err = admissionpolicy.CanRestore(ctx, reader, objs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(why).To(ContainSubstring("the operator may not create validatingadmissionpolicies.admissionregistration.k8s.io"))
	g.Expect(why).To(ContainSubstring("cleanup-operator-bootstrap-role"))
	g.Expect(why).NotTo(ContainSubstring("watch validatingadmissionpolicies"))
}

// asOperator creates every admission object, rendered for the test's admin
// as the operator, and deletes those that name it when the test ends.
func asOperator(ctx context.Context, t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	operator, err := admissionpolicy.OperatorUser(ctx, k8s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(admissionpolicy.EnsureObjects(ctx, k8s, admissionpolicy.AllObjects(operator))).To(Succeed())
	t.Cleanup(func() {
		for _, obj := range admissionpolicy.ProtectionObjects(operator) {
			_ = k8s.Delete(context.Background(), obj)
		}
	})
}

// TestTeardownConditionIsTheOperators: a user who may write a
// ManagedCluster's status (its agent, a status helper) writes any condition
// but ContentDeleteSuccess: setting, changing or removing it is refused,
// and the condition the operator (here the test's admin) wrote stays.
func TestTeardownConditionIsTheOperators(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	asOperator(ctx, t)
	agent := userClient(ctx, t, "status-writer", []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters", "managedclusters/status"},
			Verbs: []string{"get", "patch", "update"}},
	})
	mc := createCluster(ctx, t, managedCluster("reported", nil, nil))
	condition := func(typ, status, reason string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": "m",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	}
	setConditions := func(c client.Client, conds ...map[string]any) error {
		raw, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
		g.Expect(err).NotTo(HaveOccurred())
		return c.Status().Patch(ctx, mc.DeepCopy(), client.RawPatch(types.MergePatchType, raw))
	}
	refused := "ManagedCluster reported: only the cleanup operator sets, changes or removes the condition " + v1alpha1.ContentDeleteSuccessCondition

	held := condition(v1alpha1.ContentDeleteSuccessCondition, "Unknown", v1alpha1.BlastRadiusExceededReason)
	g.Eventually(func() error {
		return setConditions(agent, condition(v1alpha1.ContentDeleteSuccessCondition, "False", v1alpha1.ResourcesRemainingReason))
	}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring(refused)), "a forged begun teardown")
	g.Expect(setConditions(k8s, held)).To(Succeed(), "the operator reports a hold")
	available := condition("ManagedClusterConditionAvailable", "True", "ManagedClusterAvailable")
	g.Expect(setConditions(agent, held, available)).To(Succeed(), "another condition, the operator's kept as it is")
	g.Expect(setConditions(agent, available)).To(MatchError(ContainSubstring(refused)), "the hold removed")
	g.Expect(setConditions(agent, condition(v1alpha1.ContentDeleteSuccessCondition, "False", v1alpha1.CleanupFailedReason), available)).
		To(MatchError(ContainSubstring(refused)), "the hold turned into a teardown begun")

	got := managedCluster("reported", nil, nil)
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	g.Expect(conds).To(ContainElement(HaveKeyWithValue("reason", v1alpha1.BlastRadiusExceededReason)))
}
