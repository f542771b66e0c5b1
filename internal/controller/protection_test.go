package controller_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// unprotectAll takes the deletion-protection mark off every cluster by
// hand, so that the end of a spec can delete them: the operator takes it
// off once no policy protects a cluster, but not before its policy is gone.
func unprotectAll() {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("cluster.open-cluster-management.io/v1")
	list.SetKind("ManagedClusterList")
	Expect(k8s.List(ctx, list)).To(Succeed())
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, v1alpha1.DeletionProtectedLabel)))
	for i := range list.Items {
		if _, ok := list.Items[i].GetLabels()[v1alpha1.DeletionProtectedLabel]; ok {
			Expect(client.IgnoreNotFound(k8s.Patch(ctx, &list.Items[i], patch))).To(Succeed())
		}
	}
}

// protected says whether the cluster carries the operator's mark, written
// by its server-side apply.
func protected(g Gomega, name string) bool {
	mc := getCluster(g, name)
	v, ok := mc.GetLabels()[v1alpha1.DeletionProtectedLabel]
	if !ok {
		return false
	}
	g.Expect(v).To(Equal("true"))
	applied := false
	for _, f := range mc.GetManagedFields() {
		if f.Manager == v1alpha1.FieldManager && f.Operation == "Apply" && f.FieldsV1 != nil &&
			strings.Contains(string(f.FieldsV1.Raw), v1alpha1.DeletionProtectedLabel) {
			applied = true
		}
	}
	g.Expect(applied).To(BeTrue(), "the mark is not applied by %s: %v", v1alpha1.FieldManager, mc.GetManagedFields())
	return true
}

func annotateCluster(name string, kv map[string]string) error {
	mc := getClusterNow(name)
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

func refusedMessage(name, policy string) string {
	return fmt.Sprintf("ManagedCluster %s is protected from deletion (label %s=true, from spec.deletionProtection of CleanupPolicy %s)",
		name, v1alpha1.DeletionProtectedLabel, policy)
}

var _ = Describe("Deletion protection", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("marks the clusters the expression protects, re-marks the fleet when it changes, protects on a run-time error, and unmarks when no policy protects", func() {
		// The operator runs with the roles it ships with.
		stopManager()
		cfg, err := env.OperatorConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		startManagerAs(cfg)
		DeferCleanup(func() { stopManager(); startManager() })

		fleetCluster("prot-prod", map[string]string{"env": "prod"}, true)
		fleetCluster("prot-dev", map[string]string{"env": "dev"}, true)
		policy := cleanupPolicy("protect", v1alpha1.CleanupPolicySpec{
			Variables:          []v1alpha1.Variable{{Name: "env", Expression: "cluster.metadata.labels[?'env'].orValue('')"}},
			DeletionProtection: "variables.env == 'prod'",
		})
		Expect(k8s.Create(ctx, policy)).To(Succeed())
		governedBy("prot-prod", "protect")
		governedBy("prot-dev", "protect")
		Eventually(func(g Gomega) bool { return protected(g, "prot-prod") }).Should(BeTrue())
		Expect(protected(Default, "prot-dev")).To(BeFalse())

		// kubectl delete is refused, naming the protection and the way to confirm.
		err = k8s.Delete(ctx, managedCluster("prot-prod", nil))
		Expect(err).To(MatchError(ContainSubstring(refusedMessage("prot-prod", "protect") +
			": to delete it, confirm first with kubectl cleanup confirm-delete prot-prod (it sets the annotation " +
			v1alpha1.DeleteConfirmedAnnotation + "=prot-prod")))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
		// So is a deletecollection that takes it.
		err = k8s.DeleteAllOf(ctx, managedCluster("", nil), client.MatchingLabels{"env": "prod"})
		Expect(err).To(MatchError(ContainSubstring(refusedMessage("prot-prod", "protect"))))
		Expect(getClusterNow("prot-prod").GetDeletionTimestamp()).To(BeNil())

		// Changing the expression re-marks the fleet.
		// A merge patch: the operator writes the policy's status meanwhile.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
		before := policy.DeepCopy()
		policy.Spec.DeletionProtection = "variables.env == 'dev'"
		Expect(k8s.Patch(ctx, policy, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(protected(g, "prot-dev")).To(BeTrue())
			g.Expect(protected(g, "prot-prod")).To(BeFalse())
		}).Should(Succeed())

		// A run-time error protects, and says so.
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
		before = policy.DeepCopy()
		policy.Spec.DeletionProtection = "cluster.metadata.labels['tier'] == 'gold'"
		Expect(k8s.Patch(ctx, policy, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(protected(g, "prot-dev")).To(BeTrue())
			g.Expect(protected(g, "prot-prod")).To(BeTrue())
		}).Should(Succeed())
		Eventually(func() []string { return events("prot-prod") }).Should(ContainElement(And(
			HavePrefix(v1alpha1.ProtectionFailedReason+": spec.deletionProtection: "),
			ContainSubstring("the cluster is protected from deletion until the expression succeeds for it"))))

		// No policy: no mark.
		Expect(k8s.Delete(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(protected(g, "prot-dev")).To(BeFalse())
			g.Expect(protected(g, "prot-prod")).To(BeFalse())
			g.Expect(getCluster(g, "prot-prod").GetFinalizers()).NotTo(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		}).Should(Succeed())
		deleteCluster("prot-prod")
		clusterGone("prot-prod")
	})

	It("keeps the mark of a cluster a policy in dry run takes over, so its deletion is still refused; the policy out of dry run removes it", func() {
		fleetCluster("prot-dry", map[string]string{"dry": "yes"}, true)
		selector := "cluster.metadata.labels[?'dry'].orValue('') == 'yes'"
		Expect(k8s.Create(ctx, cleanupPolicy("protect-dry", v1alpha1.CleanupPolicySpec{
			ClusterSelector: selector, DeletionProtection: "true",
		}))).To(Succeed())
		governedBy("prot-dry", "protect-dry")
		Eventually(func(g Gomega) bool { return protected(g, "prot-dry") }).Should(BeTrue())

		By("a higher-priority policy in dry run, without protection, takes the cluster over")
		preview := cleanupPolicy("preview-dry", v1alpha1.CleanupPolicySpec{ClusterSelector: selector, Priority: 10, DryRun: true})
		Expect(k8s.Create(ctx, preview)).To(Succeed())
		governedBy("prot-dry", "preview-dry")
		Consistently(func(g Gomega) bool { return protected(g, "prot-dry") }, "2s").Should(BeTrue())
		Expect(k8s.Delete(ctx, managedCluster("prot-dry", nil))).To(MatchError(ContainSubstring("ManagedCluster prot-dry is protected from deletion")))
		Expect(getClusterNow("prot-dry").GetDeletionTimestamp()).To(BeNil())

		By("out of dry run, the policy's own spec decides: no protection")
		setDryRun("preview-dry", false)
		Eventually(func(g Gomega) bool { return protected(g, "prot-dry") }).Should(BeFalse())
	})

	It("accepts a fresh confirmation naming the cluster, then lets it be deleted and cleaned up; refuses a stale or wrong one", func() {
		fleetCluster("prot-c", map[string]string{"env": "prod"}, true)
		addon("prot-c", "search")
		Expect(k8s.Create(ctx, cleanupPolicy("protect-confirm", v1alpha1.CleanupPolicySpec{
			DeletionProtection: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		}))).To(Succeed())
		governedBy("prot-c", "protect-confirm")
		Eventually(func(g Gomega) bool { return protected(g, "prot-c") }).Should(BeTrue())

		// A confirmation naming another cluster cannot be set.
		err := annotateCluster("prot-c", map[string]string{v1alpha1.DeleteConfirmedAnnotation: "prot-other"})
		Expect(err).To(MatchError(ContainSubstring(`the annotation ` + v1alpha1.DeleteConfirmedAnnotation +
			` of ManagedCluster prot-c is "prot-other", not the cluster's own name`)))

		// A stale confirmation is refused: not accepted, and the delete is refused.
		stale := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
		Expect(annotateCluster("prot-c", map[string]string{
			v1alpha1.DeleteConfirmedAnnotation: "prot-c", v1alpha1.DeleteConfirmedAtAnnotation: stale,
		})).To(Succeed())
		Eventually(func() []string { return events("prot-c") }).Should(ContainElement(
			ContainSubstring(v1alpha1.ConfirmationRefusedReason + ": the deletion confirmation does not count: the confirmation of " + stale + " expired")))
		Expect(getClusterNow("prot-c").GetAnnotations()).NotTo(HaveKey(v1alpha1.DeleteConfirmationAcceptedAnnotation))
		err = k8s.Delete(ctx, managedCluster("prot-c", nil))
		Expect(err).To(MatchError(ContainSubstring(refusedMessage("prot-c", "protect-confirm") +
			": its confirmation of " + stale + " is not accepted")))

		// An acceptance of a confirmation that has expired since (as the
		// operator finds it after a restart) is taken back.
		Expect(annotateCluster("prot-c", map[string]string{v1alpha1.DeleteConfirmationAcceptedAnnotation: stale})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getCluster(g, "prot-c").GetAnnotations()).NotTo(HaveKey(v1alpha1.DeleteConfirmationAcceptedAnnotation))
		}).Should(Succeed())
		Eventually(func() []string { return events("prot-c") }).Should(ContainElement(v1alpha1.DeleteConfirmedReason + ": the deletion confirmation of " + stale +
			" no longer counts: the cluster is protected from deletion again"))
		Expect(k8s.Delete(ctx, managedCluster("prot-c", nil))).To(MatchError(ContainSubstring("is protected from deletion")))

		// A fresh one is accepted; the cluster is deleted and cleaned up.
		fresh := time.Now().UTC().Format(time.RFC3339)
		Expect(annotateCluster("prot-c", map[string]string{v1alpha1.DeleteConfirmedAtAnnotation: fresh})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(getCluster(g, "prot-c").GetAnnotations()).To(HaveKeyWithValue(v1alpha1.DeleteConfirmationAcceptedAnnotation, fresh))
		}).Should(Succeed())
		Expect(k8s.Delete(ctx, managedCluster("prot-c", nil))).To(Succeed())
		clusterGone("prot-c")
		Expect(objectGone("ManagedClusterAddOn", "prot-c", "search")()).To(BeTrue())
		Eventually(func(g Gomega) bool { return namespaceDeleting(g, "prot-c") }).Should(BeTrue())
	})
})
