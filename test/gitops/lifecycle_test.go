package gitops

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// More states the operator writes, each read through kstatus and the
// health check here and kept for Argo CD's own code (states_test.go).
var _ = Describe("kstatus and the Argo CD health check on a dry run and on a policy being deleted", Ordered, func() {
	It("says Current and Healthy for a dry run, with what it would change", func() {
		managedCluster("dry-1", map[string]string{"gitops": "dry"})
		Expect(createPolicy("dry", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'gitops'].orValue('') == 'dry'",
			Priority:        30,
			DryRun:          true,
		})).To(Succeed())
		Eventually(func(g Gomega) {
			a := assess(g, "dry")
			g.Expect(conditionOf(g, a, v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
			g.Expect(a.argo.Status).To(Equal("Healthy"))
			g.Expect(a.argo.Message).To(ContainSubstring("dry run: 0 object(s) would change"))
		}).Should(Succeed())
	})

	It("says Terminating and Pending deletion while a deleted policy waits for the teardown it governs, and the policy goes once it ends", func() {
		managedCluster("term-1", map[string]string{"gitops": "term"})
		Expect(createPolicy("term", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'gitops'].orValue('') == 'term'",
			Priority:        30,
			KeepNamespace:   "true",
		})).To(Succeed())
		cluster := governedCluster("term-1", "term")
		pause := func(v string) {
			patch := `{"metadata":{"annotations":{"` + v1alpha1.PausedAnnotation + `":` + v + `}}}`
			Expect(k8s.Patch(ctx, cluster.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
		}
		pause(`"true"`)
		Expect(k8s.Delete(ctx, cluster.DeepCopy())).To(Succeed())
		policy := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "term"}}
		Expect(k8s.Delete(ctx, policy)).To(Succeed())

		Eventually(func(g Gomega) {
			a := assess(g, "term")
			g.Expect(a.object.GetDeletionTimestamp()).NotTo(BeNil())
			g.Expect(conditionOf(g, a, v1alpha1.ReconcilingCondition).Reason).To(Equal(v1alpha1.TerminatingReason))
			g.Expect(a.kstatus.Status).To(Equal(status.TerminatingStatus))
			g.Expect(a.argo).To(Equal(health{Status: "Progressing", Message: "Pending deletion"}))
		}).Should(Succeed())

		pause("null")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(policy), policy))
		}).WithTimeout(time.Minute).Should(BeTrue())
	})
})
