package main

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// TestConfirmDelete: with the operator running as its own service account,
// a protected cluster cannot be deleted; the plan says so and how to
// confirm; confirm-delete confirms it, the operator accepts the
// confirmation, and the cluster is deleted and cleaned up.
func TestConfirmDelete(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	env, c := hubWithOperator(ctx, t)
	policy := &v1alpha1.CleanupPolicy{}
	policy.Name = "protect"
	policy.Spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyRequired
	policy.Spec.DeletionProtection = "cluster.metadata.name.startsWith('prod-')"
	g.Expect(c.Create(ctx, policy)).To(Succeed())
	for _, name := range []string{"prod-1", "dev-1"} {
		g.Expect(createCluster(ctx, c, name)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "prod-1"})
		g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		g.Expect(mc.GetLabels()).To(HaveKeyWithValue(v1alpha1.DeletionProtectedLabel, "true"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	out, err := kubectlCleanup(t, env.Kubeconfig, "plan", "prod-1")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Protected from deletion (spec.deletionProtection is true).\n" +
		"  kubectl delete is refused until the deletion is confirmed: kubectl cleanup confirm-delete prod-1\n"))

	out, err = kubectlCleanup(t, env.Kubeconfig, "status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("No cluster is being cleaned up.\n\n" +
		"Protected from deletion (kubectl cleanup confirm-delete CLUSTER before deleting one): prod-1\n"))

	err = c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "prod-1"))
	g.Expect(err).To(MatchError(ContainSubstring("ManagedCluster prod-1 is protected from deletion")))
	g.Expect(err).To(MatchError(ContainSubstring("confirm first with kubectl cleanup confirm-delete prod-1")))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)

	// An unprotected cluster needs no confirmation: nothing is confirmed,
	// and the command says no (exit 1), so that a deletion chained to it waits.
	out, err = kubectlCleanup(t, env.Kubeconfig, "confirm-delete", "dev-1")
	g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
	g.Expect(out).To(ContainSubstring("ManagedCluster dev-1 is not protected from deletion: nothing to confirm."))

	out, err = kubectlCleanup(t, env.Kubeconfig, "confirm-delete", "prod-1")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`ManagedCluster prod-1: deletion confirmed at \S+ and accepted by the cleanup operator.`))
	mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "prod-1"})
	g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.DeleteConfirmedAnnotation, "prod-1"))
	at := mc.GetAnnotations()[v1alpha1.DeleteConfirmedAtAnnotation]
	g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.DeleteConfirmationAcceptedAnnotation, at))

	out, err = kubectlCleanup(t, env.Kubeconfig, "plan", "prod-1")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("  Deletion confirmed at " + at + ": it counts until "))

	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "prod-1"))).To(Succeed())
	g.Eventually(func() bool {
		err := c.Get(ctx, client.ObjectKey{Name: "prod-1"}, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster"}})
		return apierrors.IsNotFound(err)
	}).WithTimeout(30*time.Second).Should(BeTrue(), "prod-1 was not cleaned up and deleted")
}
