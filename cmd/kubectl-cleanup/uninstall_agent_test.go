package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// TestUninstallLeavesWhatTheAgentCannotConfirm: the signal work of a
// cluster that is not Available gets its Orphan and stays, reported; a
// second run, once the agent applied it, deletes it. Without an operator,
// a deleted cluster whose teardown may have started holds uninstall; one
// under a dry-run policy does not; a webhook configuration that outlived
// the operator is named as the reason a policy cannot be released; a user
// with only the permissions docs/install/uninstall.md lists can run it.
func TestUninstallLeavesWhatTheAgentCannotConfirm(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, c := sharedHub(t)

	g.Expect(c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": "gone"}, "spec": map[string]any{"hubAcceptsClient": true}}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}})).To(Succeed())
	work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "cleanup-signal",
		Labels:      map[string]string{v1alpha1.SignalWorkLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy},
		Annotations: map[string]string{v1alpha1.SpecHashAnnotation: "0123456789abcdef"}}}
	g.Expect(c.Create(ctx, work)).To(Succeed())
	g.Expect(setApplied(ctx, c, work)).To(Succeed())
	// Someone else's work with the signal label only: never changed.
	lookalike := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "lookalike",
		Labels: map[string]string{v1alpha1.SignalWorkLabel: "true"}}}
	g.Expect(c.Create(ctx, lookalike)).To(Succeed())
	lookalikeVersion := lookalike.ResourceVersion
	// One with the signal label and a spec hash, without the operator's
	// managed-by label: the operator's own test (decision.IsSignalWork)
	// says it is not its signal work, so uninstall leaves it too.
	hashed := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "hashed",
		Labels:      map[string]string{v1alpha1.SignalWorkLabel: "true"},
		Annotations: map[string]string{v1alpha1.SpecHashAnnotation: "fedcba9876543210"}}}
	g.Expect(c.Create(ctx, hashed)).To(Succeed())
	hashedVersion := hashed.ResourceVersion

	// The policy that keeps anyone else from labelling a work as the
	// operator's stays while a signal work is left to retire.
	workOwner := slices.DeleteFunc(admissionpolicy.AllObjects(admissionpolicy.DefaultOperatorUser), func(o client.Object) bool {
		return o.GetName() != admissionpolicy.WorkOwnerPolicy && o.GetName() != admissionpolicy.BindingName(admissionpolicy.WorkOwnerPolicy)
	})
	g.Expect(admissionpolicy.EnsureObjects(ctx, c, workOwner)).To(Succeed())

	out, err := kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManifestWork gone/cleanup-signal: left in place with deleteOption Orphan: cluster gone is not Available"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(work), work)).To(Succeed())
	g.Expect(isOrphanWork(work)).To(BeTrue())
	g.Expect(work.DeletionTimestamp).To(BeNil())
	g.Expect(out).To(ContainSubstring("ValidatingAdmissionPolicy " + admissionpolicy.WorkOwnerPolicy + ": kept while the operator's signal works are left"))
	g.Expect(out).To(ContainSubstring("Done, but for the signal works left in place and the admission policy " + admissionpolicy.WorkOwnerPolicy))
	g.Expect(out).NotTo(ContainSubstring("the hub no longer holds"))
	for _, o := range workOwner {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed(), o.GetName())
	}

	// Keep leaves it alone, whatever the agent did.
	g.Expect(setApplied(ctx, c, work)).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--signal-works", "keep")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManifestWork gone/cleanup-signal: left in place (--signal-works=keep)"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(work), work)).To(Succeed())
	// Kept as they are, the operator's: the policy that guards their
	// label stays, so that nobody labels a work of theirs as the
	// operator's for a later run to retire.
	g.Expect(out).To(ContainSubstring("Done, but for the signal works left in place and the admission policy " +
		admissionpolicy.WorkOwnerPolicy + " that guards them: once they are deleted, or retired by a run without --signal-works=keep"))
	for _, o := range workOwner {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed(), o.GetName())
	}

	// The agent applied the Orphan: the next run deletes the work.
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManifestWork gone/cleanup-signal: deleted; the work agent had applied its Orphan"))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(work), work))).To(BeTrue())
	g.Expect(out).To(ContainSubstring("ManifestWork gone/lookalike: left in place: it has the label " + v1alpha1.SignalWorkLabel +
		"=true, but the operator did not write it"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lookalike), lookalike)).To(Succeed())
	g.Expect(lookalike.ResourceVersion).To(Equal(lookalikeVersion))
	g.Expect(out).To(ContainSubstring("ManifestWork gone/hashed: left in place: it has the label " + v1alpha1.SignalWorkLabel +
		"=true, but the operator did not write it"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(hashed), hashed)).To(Succeed())
	g.Expect(hashed.ResourceVersion).To(Equal(hashedVersion))

	// A deleted cluster under a dry-run policy is no teardown: the operator
	// changed nothing for it, so it is released and the hub deletes it.
	g.Expect(createCluster(ctx, c, "dry", v1alpha1.ClusterCleanupFinalizer)).To(Succeed())
	g.Expect(setCondition(ctx, c, "dry", v1alpha1.ContentDeleteSuccessCondition, "Unknown", v1alpha1.DryRunReason)).To(Succeed())
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "dry"))).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManagedCluster dry: removed finalizer " + v1alpha1.ClusterCleanupFinalizer))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "dry"}, unstructuredObject(managedClusterGVK, "", "dry")))).To(BeTrue())

	// A deleted cluster with the finalizer and no outcome yet may be mid-way:
	// without the operator it never ends, and uninstall says to start it.
	g.Expect(createCluster(ctx, c, "pending", v1alpha1.ClusterCleanupFinalizer)).To(Succeed())
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "pending"))).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("refusing: 1 teardown(s) in progress: pending."))
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--wait", "--timeout", "1s")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Note: the operator does not seem to run"))
	g.Expect(out).To(ContainSubstring("  pending: no step reported yet"))
	g.Expect(out).To(ContainSubstring("waiting for the teardowns of pending: --timeout 1s passed"))
	mc := unstructuredObject(managedClusterGVK, "", "pending")
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "pending"}, mc)).To(Succeed())
	g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))

	// A cluster deleted after the checks ran (as while the operator runs,
	// with --ignore-running-operator): releasing the clusters leaves it,
	// finalizer and all, and says why; it never cuts a live teardown.
	var b strings.Builder
	u := &uninstaller{c: c, out: &b, signalWorks: signalWorksOrphan}
	err = u.releaseClusters(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("ManagedCluster pending: left in place: it is being deleted")))
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "pending"}, mc)).To(Succeed())
	g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
	g.Expect(b.String()).NotTo(ContainSubstring("ManagedCluster pending"))

	// The operator's webhook configuration outlived it: the finalizer of a
	// CleanupPolicy cannot be removed, and uninstall says why.
	var hooks admissionregistrationv1.ValidatingWebhookConfigurationList
	g.Expect(c.List(ctx, &hooks)).To(Succeed())
	g.Expect(hooks.Items).NotTo(BeEmpty())
	deleteWebhookConfigurations(ctx, g, c)
	g.Expect(c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{v1alpha1.InUseFinalizer}},
		Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}}})).To(Succeed())
	restoreWebhookConfigurations(ctx, g, c, hooks.Items)
	g.Expect(patchMeta(ctx, c, managedClusterGVK, client.ObjectKey{Name: "pending"}, `{"metadata":{"finalizers":null}}`)).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("CleanupPolicy held: "))
	g.Expect(out).To(ContainSubstring("its ValidatingWebhookConfiguration outlived it; delete that"))

	// A user with the permissions docs/install/uninstall.md lists, without those to
	// read Deployments and Leases: uninstall warns that it cannot tell
	// whether the operator runs, and does its work.
	deleteWebhookConfigurations(ctx, g, c)
	userConfig := userKubeconfig(ctx, t, g, c, env, "uninstaller", "uninstaller", []rbacv1.PolicyRule{
		{APIGroups: []string{"", "cluster.open-cluster-management.io", "cleanup.fleetops.dev", "policy.open-cluster-management.io"},
			Resources: []string{"managedclusters", "cleanuppolicies", "namespaces", "configurationpolicies"},
			Verbs:     []string{"get", "list", "patch"}},
		{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks"},
			Verbs: []string{"get", "list", "patch", "delete"}},
		{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
	})
	g.Expect(admissionpolicy.Ensure(ctx, c)).To(Succeed())
	out, err = kubectlCleanup(t, userConfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Warning: cannot tell whether the operator still runs: cannot list Deployments"))
	g.Expect(out).To(ContainSubstring("CleanupPolicy held: removed finalizer " + v1alpha1.InUseFinalizer))
	g.Expect(out).To(ContainSubstring("ValidatingAdmissionPolicy " + admissionpolicy.DeletingClusterPolicy + ": deleted"))
	// Only the work someone else labelled keeps the label.
	g.Expect(operatorMarks(ctx, c)).To(ConsistOf("ManifestWork gone/lookalike: label "+v1alpha1.SignalWorkLabel,
		"ManifestWork gone/hashed: label "+v1alpha1.SignalWorkLabel, "ManifestWork gone/hashed: annotation "+v1alpha1.SpecHashAnnotation))

	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--signal-works", "delete")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`--signal-works: "delete" is not one of orphan, keep`))
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--timeout", "0s")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("--timeout: 0s is not a positive duration"))
}
