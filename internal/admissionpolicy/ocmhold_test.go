package admissionpolicy_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// markOperator is the operator's user in TestGovernedMarkOnlyByOperator.
const markOperator = "mark-operator"

// ocmUser is OCM's registration controller as the hold sees it on a hub:
// its service account, with the groups a service account's token carries.
var ocmUser = envtest.User{Name: admissionpolicy.DefaultOCMCleanupUsers[0],
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:open-cluster-management-hub", "system:authenticated"}}

// ocmClient is a client as ocmUser, allowed what OCM's gc does: delete
// add-ons and works.
func ocmClient(ctx context.Context, t *testing.T) client.Client {
	t.Helper()
	g := NewWithT(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ocm-gc"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks"}, Verbs: []string{"delete", "list"}},
		{APIGroups: []string{"addon.open-cluster-management.io"}, Resources: []string{"managedclusteraddons"}, Verbs: []string{"delete", "list"}},
	}}
	g.Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, role))).To(Succeed())
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ocm-gc"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ocm-gc"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ocmUser.Name}}}
	g.Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, b))).To(Succeed())
	u, err := testEnv.AddUser(ocmUser, nil)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(u.Config(), client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestOCMCleanupHeld: OCM's registration controller cannot delete the
// add-ons and works of a namespace the operator marked governed, and its
// refusal names the policy (OCM writes it into the cluster's Deleting
// condition); in a namespace not marked, or marked by anyone but the
// operator's value "true", it deletes as without the operator; anyone
// else deletes in a marked namespace as before; and with no user to hold,
// nothing is held.
func TestOCMCleanupHeld(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	admin, err := admissionpolicy.OperatorUser(ctx, k8s)
	g.Expect(err).NotTo(HaveOccurred())
	guardsFor(ctx, t, admin)
	ocm := ocmClient(ctx, t)
	marked := newMarkedNamespace(ctx, t, "true", "fleet")
	want := fmt.Sprintf("cluster %s is governed by CleanupPolicy fleet: its teardown deletes its add-ons and works in its own order "+
		"when the cluster is deleted; OCM's resource cleanup waits for it (kubectl cleanup status %s)", marked, marked)
	g.Expect(k8s.Create(ctx, manifestWork(marked, "probe", nil))).To(Succeed())
	g.Eventually(func() error {
		return ocm.Delete(ctx, manifestWork(marked, "probe", nil), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring(want)), "the hold is not enforced")

	g.Expect(k8s.Create(ctx, addOn(marked, "addon"))).To(Succeed())
	for _, obj := range []client.Object{manifestWork(marked, "probe", nil), addOn(marked, "addon")} {
		err := ocm.Delete(ctx, obj)
		g.Expect(err).To(MatchError(ContainSubstring(want)))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	}
	// Someone else: not held (their rights decide).
	g.Expect(k8s.Delete(ctx, addOn(marked, "addon"))).To(Succeed())

	for _, value := range []string{"", "false"} {
		open := newMarkedNamespace(ctx, t, value, "fleet")
		g.Expect(k8s.Create(ctx, manifestWork(open, "work", nil))).To(Succeed())
		g.Expect(ocm.Delete(ctx, manifestWork(open, "work", nil))).To(Succeed(), "label %q", value)
	}

	By := func(string) {}
	By("no user to hold: the policy holds nothing")
	unheld := admissionpolicy.OCMCleanupObjects(nil)
	g.Expect(k8s.Update(ctx, withVersion(ctx, g, unheld[0]))).To(Succeed())

	g.Eventually(func() error {
		return ocm.Delete(ctx, manifestWork(marked, "probe", nil), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(Succeed())
}

// TestGovernedMarkOnlyByOperator: a user who may create, patch and update
// namespaces cannot set the mark (to stall OCM's cleanup of a cluster no
// policy governs), remove it or change the policy it names (to let OCM
// race a teardown), nor create a namespace that carries it; every other
// label stays theirs. The operator can.
func TestGovernedMarkOnlyByOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	nsRights := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"},
		Verbs: []string{"get", "create", "patch", "update"}}
	user := userClient(ctx, t, "namespace-patcher", []rbacv1.PolicyRule{nsRights})
	operator := userClient(ctx, t, markOperator, []rbacv1.PolicyRule{nsRights})
	// Marked as the test's admin, before the guard names another operator.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: newMarkedNamespace(ctx, t, "true", "fleet")}}
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: newMarkedNamespace(ctx, t, "", "")}}
	guardsFor(ctx, t, markOperator)
	const refused = "only the cleanup operator sets, changes or removes the label " + v1alpha1.GovernedNamespaceLabel
	unlabel := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.GovernedNamespaceLabel)
	g.Eventually(func(g Gomega) {
		g.Expect(mergePatch(ctx, user, ns.DeepCopy(), unlabel, client.DryRunAll)).To(MatchError(ContainSubstring(refused)))
		// The guard rendered for another operator is gone too.
		g.Expect(mergePatch(ctx, operator, ns.DeepCopy(), unlabel, client.DryRunAll)).To(Succeed())
	}).WithTimeout(enforcementTimeout).Should(Succeed(), "the guard is not enforced")
	for _, patch := range []string{
		fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.GovernedNamespaceLabel),
		fmt.Sprintf(`{"metadata":{"labels":{%q:"false"}}}`, v1alpha1.GovernedNamespaceLabel),
		fmt.Sprintf(`{"metadata":{"annotations":{%q:"other"}}}`, v1alpha1.GoverningPolicyAnnotation),
		fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.GoverningPolicyAnnotation),
	} {
		err := mergePatch(ctx, user, ns.DeepCopy(), patch)
		g.Expect(err).To(MatchError(ContainSubstring(refused)), patch)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	}
	g.Expect(mergePatch(ctx, user, ns.DeepCopy(), `{"metadata":{"labels":{"example.com/team":"a"}}}`)).To(Succeed())
	// Nor through the subresources, which write the metadata too.
	unmark := client.RawPatch(types.MergePatchType, []byte(unlabel))
	g.Expect(user.Status().Patch(ctx, ns.DeepCopy(), unmark)).To(MatchError(ContainSubstring(refused)), "namespaces/status")
	bare := &corev1.Namespace{}
	g.Expect(user.Get(ctx, client.ObjectKeyFromObject(ns), bare)).To(Succeed())
	delete(bare.Labels, v1alpha1.GovernedNamespaceLabel)
	g.Expect(user.SubResource("finalize").Update(ctx, bare)).To(MatchError(ContainSubstring(refused)), "namespaces/finalize")

	err := mergePatch(ctx, user, plain.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, v1alpha1.GovernedNamespaceLabel))
	g.Expect(err).To(MatchError(ContainSubstring(refused)))
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "forged-", Labels: map[string]string{v1alpha1.GovernedNamespaceLabel: "true"}}}
	g.Expect(user.Create(ctx, created)).To(MatchError(ContainSubstring(refused)))

	// The operator marks and unmarks.
	g.Expect(mergePatch(ctx, operator, plain.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:"fleet"}}}`,
		v1alpha1.GovernedNamespaceLabel, v1alpha1.GoverningPolicyAnnotation))).To(Succeed())
	g.Expect(mergePatch(ctx, operator, ns.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:null},"annotations":{%q:null}}}`,
		v1alpha1.GovernedNamespaceLabel, v1alpha1.GoverningPolicyAnnotation))).To(Succeed())
}

// guardsFor puts the admission objects in place rendered for the operator
// user, in place of any rendered for another, and deletes them after the
// test.
func guardsFor(ctx context.Context, t *testing.T, user string) {
	t.Helper()
	g := NewWithT(t)
	objs := admissionpolicy.AllObjects(user)
	renamed := append(admissionpolicy.ProtectionObjects(user), admissionpolicy.OCMCleanupObjects(nil)...)
	for _, obj := range renamed {
		g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, obj.DeepCopyObject().(client.Object)))).To(Succeed())
	}
	g.Expect(admissionpolicy.EnsureObjects(ctx, k8s, objs)).To(Succeed())
	t.Cleanup(func() {
		for _, obj := range renamed {
			_ = k8s.Delete(context.Background(), obj)
		}
	})
}

// newMarkedNamespace creates, as the test's admin, a namespace with the
// label value and policy annotation given ("" for none).
func newMarkedNamespace(ctx context.Context, t *testing.T, value, policy string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "governed-"}}
	if value != "" {
		ns.Labels = map[string]string{v1alpha1.GovernedNamespaceLabel: value}
	}
	if policy != "" {
		ns.Annotations = map[string]string{v1alpha1.GoverningPolicyAnnotation: policy}
	}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// withVersion gives obj the resourceVersion of the object of its name.
func withVersion(ctx context.Context, g *WithT, obj client.Object) client.Object {
	current := obj.DeepCopyObject().(client.Object)
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), current)).To(Succeed())
	obj.SetResourceVersion(current.GetResourceVersion())
	return obj
}
