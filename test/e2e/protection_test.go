package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// The names of deletion protection, as the API contract states them.
const (
	deletionProtectedLabel         = "cleanup.fleetops.dev/deletion-protected"
	deleteConfirmedAnnotation      = "cleanup.fleetops.dev/delete-confirmed"
	deleteConfirmedAtAnnotation    = "cleanup.fleetops.dev/delete-confirmed-at"
	confirmationAcceptedAnnotation = "cleanup.fleetops.dev/delete-confirmation-accepted"
)

func cluster1() *clusterv1.ManagedCluster {
	return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName}}
}

// unprotect takes the deletion-protection mark off cluster1, so that a
// scenario that stopped half-way does not keep the reset from deleting it.
func unprotect() {
	patch := client.RawPatch(types.MergePatchType, mustJSON(map[string]any{"metadata": map[string]any{
		"labels": map[string]any{deletionProtectedLabel: nil}}}))
	Expect(client.IgnoreNotFound(k8s.Patch(ctx, cluster1(), patch))).To(Succeed())
}

// Scenario 12: a policy protects cluster1 from deletion. kubectl delete is
// refused, saying how to confirm; a stale confirmation is refused; the
// plugin's confirm-delete, accepted by the operator, lets the deletion
// through, and the cleanup runs as usual.
func scenarioProtection() {
	joinCluster(map[string]string{scenarioLabel: "12"})
	cleanupPolicy(policyYAML("s12", "12", `
removeStrategy:
  default: Required
deletionProtection: "cluster.metadata.labels[?'e2e.fleetops.dev/scenario'].orValue('') == '12'"
`))
	governedBy("s12")
	app := manifestWork("12", "s12-app", nil, nil)

	By("marking the cluster protected")
	Eventually(func(g Gomega) {
		mc := cluster1()
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		g.Expect(mc.Labels).To(HaveKeyWithValue(deletionProtectedLabel, "true"))
	}).Should(Succeed())

	By("refusing kubectl delete, naming the protection and the way to confirm")
	Eventually(func() error {
		return k8s.Delete(ctx, cluster1(), client.DryRunAll)
	}).Should(MatchError(ContainSubstring("ManagedCluster " + clusterName + " is protected from deletion")))
	err := k8s.Delete(ctx, cluster1())
	Expect(err).To(MatchError(ContainSubstring("from spec.deletionProtection of CleanupPolicy s12): to delete it, confirm first with kubectl cleanup confirm-delete " + clusterName)))
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)

	By("refusing a stale confirmation")
	stale := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	Expect(k8s.Patch(ctx, cluster1(), client.RawPatch(types.MergePatchType, mustJSON(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{deleteConfirmedAnnotation: clusterName, deleteConfirmedAtAnnotation: stale}}})))).To(Succeed())
	Eventually(clusterEvents).Should(ContainElement("DeleteConfirmationRefused"))
	err = k8s.Delete(ctx, cluster1())
	Expect(err).To(MatchError(ContainSubstring("its confirmation of " + stale + " is not accepted")))

	By("refusing a confirmation naming another cluster")
	err = k8s.Patch(ctx, cluster1(), client.RawPatch(types.MergePatchType, mustJSON(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{deleteConfirmedAnnotation: "cluster2"}}})))
	Expect(err).To(MatchError(ContainSubstring(`is "cluster2", not the cluster's own name`)))

	By("confirming with kubectl cleanup confirm-delete, then deleting")
	cmd := exec.Command(filepath.Join(paths.bin, "kubectl-cleanup"), "--kubeconfig", adminKubeconfig, "confirm-delete", clusterName)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	Expect(string(out)).To(ContainSubstring(fmt.Sprintf("ManagedCluster %s: deletion confirmed at", clusterName)))
	Expect(string(out)).To(ContainSubstring("and accepted by the cleanup operator"))
	mc := cluster1()
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
	Expect(mc.Annotations).To(HaveKeyWithValue(confirmationAcceptedAnnotation, mc.Annotations[deleteConfirmedAtAnnotation]))
	deleteCluster()

	By("cleaning up as usual")
	hubClean()
	Expect(app.onCluster()).To(BeEmpty())
	Eventually(clusterEvents).Should(ContainElements("DeletionProtection", "DeleteConfirmation", "Completed"))
}
