package admissionpolicy_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// ownerOperator is the operator's user in TestWorkOwnerOnlyByOperator.
const ownerOperator = "owner-operator"

// TestWorkOwnerOnlyByOperator: whoever may create and patch the works of a
// cluster namespace, but not delete them, cannot make a work the
// operator's own, which the operator would then orphan and delete for them
// as a retired signal work; nor take the label, or the signal label, off
// the operator's signal work; nor create a work that carries it. The
// label's other values, and every other label, stay theirs. The operator
// can.
func TestWorkOwnerOnlyByOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	worksRights := rbacv1.PolicyRule{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks"},
		Verbs: []string{"get", "create", "patch", "update"}}
	user := userClient(ctx, t, "work-patcher", []rbacv1.PolicyRule{worksRights})
	operator := userClient(ctx, t, ownerOperator, []rbacv1.PolicyRule{worksRights})
	ns := newNamespace(ctx, t, nil)
	// Created as the test's admin, before the guard names another operator.
	theirs := manifestWork(ns, "theirs", nil)
	g.Expect(k8s.Create(ctx, theirs)).To(Succeed())
	signal := manifestWork(ns, "cleanup-signal", nil)
	signal.SetLabels(map[string]string{v1alpha1.SignalWorkLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy})
	g.Expect(k8s.Create(ctx, signal)).To(Succeed())
	guardsFor(ctx, t, ownerOperator)

	const refused = "only the cleanup operator gives a ManifestWork the label " + v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedBy
	forge := fmt.Sprintf(`{"metadata":{"labels":{%q:"true",%q:%q}}}`, v1alpha1.SignalWorkLabel, v1alpha1.ManagedByLabel, v1alpha1.ManagedBy)
	g.Eventually(func(g Gomega) {
		g.Expect(mergePatch(ctx, user, theirs.DeepCopy(), forge, client.DryRunAll)).To(MatchError(ContainSubstring(refused)))
		// The guard rendered for another operator is gone too.
		g.Expect(mergePatch(ctx, operator, theirs.DeepCopy(), forge, client.DryRunAll)).To(Succeed())
	}).WithTimeout(enforcementTimeout).Should(Succeed(), "the guard is not enforced")

	for _, c := range []struct {
		work  client.Object
		patch string
	}{
		{theirs, forge},
		{signal, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.ManagedByLabel)},
		{signal, fmt.Sprintf(`{"metadata":{"labels":{%q:"Helm"}}}`, v1alpha1.ManagedByLabel)},
	} {
		err := mergePatch(ctx, user, c.work.DeepCopyObject().(client.Object), c.patch)
		g.Expect(err).To(MatchError(ContainSubstring(refused)), c.patch)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	}
	// Nor take the signal label off the operator's work, which would make
	// it one of its other works.
	unsignal := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.SignalWorkLabel)
	g.Expect(mergePatch(ctx, user, signal.DeepCopy(), unsignal)).To(MatchError(ContainSubstring(
		"only the cleanup operator changes the label " + v1alpha1.SignalWorkLabel + " of a ManifestWork that is its own")))
	forged := manifestWork(ns, "forged", nil)
	forged.SetLabels(map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy})
	g.Expect(user.Create(ctx, forged)).To(MatchError(ContainSubstring(refused)))

	// Other values of the label, and the signal label alone, are anyone's;
	// so are the operator's work's other labels.
	g.Expect(mergePatch(ctx, user, theirs.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:"Helm",%q:"true"}}}`,
		v1alpha1.ManagedByLabel, v1alpha1.SignalWorkLabel))).To(Succeed())
	g.Expect(mergePatch(ctx, user, signal.DeepCopy(), `{"metadata":{"labels":{"example.com/team":"a"}}}`)).To(Succeed())
	helm := manifestWork(ns, "helm", nil)
	helm.SetLabels(map[string]string{v1alpha1.ManagedByLabel: "Helm"})
	g.Expect(user.Create(ctx, helm)).To(Succeed())

	// The operator gives and takes its label.
	g.Expect(mergePatch(ctx, operator, theirs.DeepCopy(), forge)).To(Succeed())
	g.Expect(mergePatch(ctx, operator, signal.DeepCopy(), unsignal)).To(Succeed())
	g.Expect(mergePatch(ctx, operator, signal.DeepCopy(), fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.ManagedByLabel))).To(Succeed())
}
