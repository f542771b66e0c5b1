package admissionpolicy_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

func managedCluster(name string, labels, annotations map[string]string) *unstructured.Unstructured {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
	mc.SetKind("ManagedCluster")
	mc.SetName(name)
	mc.SetLabels(labels)
	mc.SetAnnotations(annotations)
	mc.Object["spec"] = map[string]any{"hubAcceptsClient": true}
	return mc
}

var protectedLabels = map[string]string{v1alpha1.DeletionProtectedLabel: "true", "test.fleetops.dev/set": "protection"}

func createCluster(ctx context.Context, t *testing.T, mc *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	NewWithT(t).Expect(k8s.Create(ctx, mc)).To(Succeed())
	t.Cleanup(func() {
		// Take the mark off, then delete: the test's leftovers must not hold.
		ctx := context.Background()
		cur := mc.DeepCopy()
		if k8s.Get(ctx, client.ObjectKeyFromObject(mc), cur) != nil {
			return
		}
		patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.DeletionProtectedLabel)))
		_ = k8s.Patch(ctx, cur, patch)
		_ = k8s.Delete(ctx, cur)
	})
	return mc
}

func setAnnotations(ctx context.Context, mc *unstructured.Unstructured, kv map[string]string) error {
	a := mc.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range kv {
		a[k] = v
	}
	mc.SetAnnotations(a)
	return k8s.Update(ctx, mc)
}

// TestDeletionProtection: a marked ManagedCluster cannot be deleted, one by
// one or through deletecollection, unless it carries a confirmation that
// names it and that the operator accepted; the refusal says how to
// confirm. A confirmation that names another cluster cannot be set.
func TestDeletionProtection(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	g.Expect(admissionpolicy.Ensure(ctx, k8s)).To(Succeed())

	const name = "protected-a"
	mc := createCluster(ctx, t, managedCluster(name, protectedLabels, map[string]string{v1alpha1.GoverningPolicyAnnotation: "prod"}))
	protected := fmt.Sprintf("ManagedCluster %s is protected from deletion (label %s=true, from spec.deletionProtection of CleanupPolicy prod)",
		name, v1alpha1.DeletionProtectedLabel)
	howTo := fmt.Sprintf("kubectl cleanup confirm-delete %[1]s (it sets the annotation %[2]s=%[1]s and %[3]s to the time",
		name, v1alpha1.DeleteConfirmedAnnotation, v1alpha1.DeleteConfirmedAtAnnotation)
	g.Eventually(func() error {
		return k8s.Delete(ctx, mc.DeepCopy(), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(MatchError(ContainSubstring(protected)), "the policy is not enforced")

	// Not confirmed.
	err := k8s.Delete(ctx, mc.DeepCopy())
	g.Expect(err).To(MatchError(ContainSubstring(protected + ": to delete it, confirm first with " + howTo)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)

	// A confirmation naming another cluster cannot be set, nor created.
	g.Eventually(func() error {
		return k8s.Update(ctx, withAnnotation(mc, v1alpha1.DeleteConfirmedAnnotation, "protected-b"), client.DryRunAll)
	}).WithTimeout(enforcementTimeout).Should(HaveOccurred(), "the confirmation policy is not enforced")
	err = setAnnotations(ctx, mc, map[string]string{v1alpha1.DeleteConfirmedAnnotation: "protected-b"})
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf(`the annotation %s of ManagedCluster %s is "protected-b", not the cluster's own name`,
		v1alpha1.DeleteConfirmedAnnotation, name))))
	g.Expect(err).To(MatchError(ContainSubstring("kubectl cleanup confirm-delete " + name)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	err = k8s.Create(ctx, managedCluster("copied", nil, map[string]string{v1alpha1.DeleteConfirmedAnnotation: name}))
	g.Expect(err).To(MatchError(ContainSubstring(`of ManagedCluster copied is "` + name + `", not the cluster's own name`)))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())

	// Confirmed, but not accepted: refused.
	const at = "2026-01-02T15:04:05Z"
	g.Expect(setAnnotations(ctx, mc, map[string]string{v1alpha1.DeleteConfirmedAnnotation: name, v1alpha1.DeleteConfirmedAtAnnotation: at})).To(Succeed())
	err = k8s.Delete(ctx, mc.DeepCopy())
	g.Expect(err).To(MatchError(ContainSubstring(protected + ": its confirmation of " + at + " is not accepted: it expired, or the cleanup operator has not seen it yet; confirm again with " + howTo)))

	// Accepted for another confirmation (an older one): refused.
	g.Expect(setAnnotations(ctx, mc, map[string]string{v1alpha1.DeleteConfirmationAcceptedAnnotation: "2026-01-02T14:00:00Z"})).To(Succeed())
	err = k8s.Delete(ctx, mc.DeepCopy())
	g.Expect(err).To(MatchError(ContainSubstring(protected + ": its confirmation of " + at + " is not the one the cleanup operator accepted")))

	// A second protected cluster: deletecollection is refused for each.
	other := createCluster(ctx, t, managedCluster("protected-b", protectedLabels, nil))
	err = k8s.DeleteAllOf(ctx, managedCluster("", nil, nil), client.MatchingLabels{"test.fleetops.dev/set": "protection"})
	g.Expect(err).To(MatchError(ContainSubstring("is protected from deletion")))
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	g.Expect(mc.GetDeletionTimestamp()).To(BeNil())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
	g.Expect(other.GetDeletionTimestamp()).To(BeNil())

	// Accepted: deleted.
	g.Expect(setAnnotations(ctx, mc, map[string]string{v1alpha1.DeleteConfirmationAcceptedAnnotation: at})).To(Succeed())
	g.Expect(k8s.Delete(ctx, mc.DeepCopy())).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Satisfy(apierrors.IsNotFound))

	// A cluster without the mark is deleted without confirmation.
	free := createCluster(ctx, t, managedCluster("unprotected", nil, nil))
	g.Expect(k8s.Delete(ctx, free)).To(Succeed())
}

func withAnnotation(mc *unstructured.Unstructured, key, value string) *unstructured.Unstructured {
	out := mc.DeepCopy()
	a := out.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	out.SetAnnotations(a)
	return out
}
