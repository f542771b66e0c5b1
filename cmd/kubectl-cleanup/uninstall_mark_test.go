package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
)

// TestUninstallByAPersonWithMarksGuarded: on a hub where the operator's
// admission policies are in force (rendered for the operator's service
// account, and enforced), a person who is not in system:masters, with the
// permissions docs/install/uninstall.md lists, runs uninstall once the
// operator is gone. Stripping the clusters while the protection-mark policy
// stands is refused; uninstall deletes that policy first, so the person's
// uninstall removes every mark, the dry run prints the same order, and
// deletion protection stands until the clusters are released.
func TestUninstallByAPersonWithMarksGuarded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, c := sharedHub(t)

	const accepted = "2026-01-02T15:04:05Z"
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": "marked", "finalizers": []any{v1alpha1.ClusterCleanupFinalizer},
			"labels": map[string]any{v1alpha1.DeletionProtectedLabel: "true"},
			"annotations": map[string]any{v1alpha1.GoverningPolicyAnnotation: "fleet",
				v1alpha1.DeleteConfirmationAcceptedAnnotation: accepted}},
		"spec": map[string]any{"hubAcceptsClient": true}}}
	g.Expect(c.Create(ctx, mc)).To(Succeed())
	g.Expect(admissionpolicy.EnsureObjects(ctx, c, admissionpolicy.AllObjects(admissionpolicy.DefaultOperatorUser))).To(Succeed())

	userConfig := userKubeconfig(ctx, t, g, c, env, "person", "person-uninstall", []rbacv1.PolicyRule{
		{APIGroups: []string{"", "cluster.open-cluster-management.io", "cleanup.fleetops.dev", "policy.open-cluster-management.io"},
			Resources: []string{"managedclusters", "cleanuppolicies", "namespaces", "configurationpolicies"},
			Verbs:     []string{"get", "list", "patch"}},
		{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks"},
			Verbs: []string{"get", "list", "patch", "delete"}},
		{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
	})
	restCfg, err := clientcmd.BuildConfigFromFlags("", userConfig)
	g.Expect(err).NotTo(HaveOccurred())
	person, err := client.New(restCfg, client.Options{Scheme: operator.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())

	// The policy is enforced for the person.
	unpin := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.GoverningPolicyAnnotation)))
	refusedBy := "ValidatingAdmissionPolicy '" + admissionpolicy.ProtectionMarkPolicy + "'"
	g.Eventually(func() error {
		return person.Patch(ctx, mc.DeepCopy(), unpin, client.DryRunAll)
	}).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring(refusedBy)))

	// Stripping the clusters with the policy standing is refused, and
	// changes nothing.
	var b strings.Builder
	u := &uninstaller{c: person, out: &b, signalWorks: signalWorksOrphan, now: time.Now}
	g.Expect(u.releaseClusters(ctx)).To(MatchError(And(ContainSubstring("ManagedCluster marked: "), ContainSubstring(refusedBy))))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.GetFinalizers()).To(ConsistOf(v1alpha1.ClusterCleanupFinalizer))
	g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "fleet"))

	markBinding := "ValidatingAdmissionPolicyBinding " + admissionpolicy.BindingName(admissionpolicy.ProtectionMarkPolicy)
	markPolicy := "ValidatingAdmissionPolicy " + admissionpolicy.ProtectionMarkPolicy
	stripped := "ManagedCluster marked: %s finalizer " + v1alpha1.ClusterCleanupFinalizer + ", label " + v1alpha1.DeletionProtectedLabel +
		", annotation " + v1alpha1.GoverningPolicyAnnotation
	out, err := kubectlCleanup(t, userConfig, "uninstall", "--dry-run")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(inOrder(out, markBinding+": would delete", markPolicy+": would delete", fmt.Sprintf(stripped, "would remove"),
		"ValidatingAdmissionPolicyBinding "+admissionpolicy.BindingName(admissionpolicy.DeletionProtectionPolicy)+": would delete",
		"ValidatingAdmissionPolicy "+admissionpolicy.DeletionProtectionPolicy+": would delete", "Dry run done")).To(Succeed(), out)
	g.Expect(strings.Count(out, markPolicy+":")).To(Equal(1), out)
	g.Expect(c.Get(ctx, client.ObjectKey{Name: admissionpolicy.ProtectionMarkPolicy}, &admissionregistrationv1.ValidatingAdmissionPolicy{})).To(Succeed())

	out, err = kubectlCleanup(t, userConfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(inOrder(out, markBinding+": deleted", markPolicy+": deleted", fmt.Sprintf(stripped, "removed"),
		"ValidatingAdmissionPolicy "+admissionpolicy.DeletionProtectionPolicy+": deleted", "Done:")).To(Succeed(), out)
	g.Expect(strings.Count(out, markPolicy+":")).To(Equal(1), out)
	g.Expect(operatorMarks(ctx, c)).To(BeEmpty())
	for _, obj := range admissionpolicy.AllObjects("") {
		gvk := obj.GetObjectKind().GroupVersionKind()
		err := c.Get(ctx, client.ObjectKey{Name: obj.GetName()}, metaObject(gvk, "", obj.GetName()))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s: %v", gvk.Kind, obj.GetName(), err)
	}
}

// TestWhileMarkLingers: a change the deleted protection-mark policy still
// refuses is tried again until it passes, but only once uninstall deleted
// that policy, and not past markGoneBy; other errors return at once.
func TestWhileMarkLingers(t *testing.T) {
	g := NewWithT(t)
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "cluster.open-cluster-management.io", Resource: "managedclusters"}, "c1",
		fmt.Errorf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request", admissionpolicy.ProtectionMarkPolicy,
			admissionpolicy.BindingName(admissionpolicy.ProtectionMarkPolicy)))
	refusingTwice := func(calls *int) func() error {
		return func() error {
			if *calls++; *calls <= 2 {
				return refused
			}
			return nil
		}
	}
	now := time.Now()
	u := &uninstaller{now: func() time.Time { return now }}

	calls := 0
	g.Expect(u.whileMarkLingers(context.Background(), refusingTwice(&calls))).To(MatchError(refused))
	g.Expect(calls).To(Equal(1), "the policy was not deleted by uninstall: no retry")

	u.markGoneBy = now.Add(markLag)
	calls = 0
	g.Expect(u.whileMarkLingers(context.Background(), refusingTwice(&calls))).To(Succeed())
	g.Expect(calls).To(Equal(3))

	calls = 0
	other := errors.New("conflict")
	g.Expect(u.whileMarkLingers(context.Background(), func() error { calls++; return other })).To(MatchError(other))
	g.Expect(calls).To(Equal(1))

	u.markGoneBy = now
	calls = 0
	g.Expect(u.whileMarkLingers(context.Background(), refusingTwice(&calls))).To(MatchError(refused))
	g.Expect(calls).To(Equal(1), "past markGoneBy: no retry")
}
