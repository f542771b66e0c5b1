package controller_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// The works of a cluster are reconciled together (one request per cluster
// namespace): one work the API server refuses to stamp must not keep the
// others from theirs.
var _ = Describe("The works of one cluster, reconciled together", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("stamps every other work while one is refused", func() {
		binding := refuseAdmission("refuse-batch-stamp", admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"work.open-cluster-management.io"}, APIVersions: []string{"*"},
				Resources: []string{"manifestworks"}}},
			admissionregistrationv1.Validation{Expression: fmt.Sprintf(
				"object.metadata.name != 'refused' || !has(object.metadata.annotations) || !('%s' in object.metadata.annotations)",
				v1alpha1.OrphaningAnnotation)})

		fleetCluster("batch-1", nil, true)
		for _, n := range []string{"a", "m", "z"} {
			manifestWork("batch-1", n, "gitops", manifest("v1", "ConfigMap", "default", "cm-"+n))
		}
		manifestWork("batch-1", "refused", "gitops", manifest("v1", "ConfigMap", "default", "cm-refused"),
			manifest("v1", "ConfigMap", "default", "cm-keep"))
		// The refusal is in force before the policy asks for a stamp.
		Eventually(func() error {
			w := getWork(Default, "batch-1", "refused")
			w.SetAnnotations(map[string]string{v1alpha1.OrphaningAnnotation: "probe"})
			return k8s.Update(ctx, w, client.DryRunAll)
		}).Should(MatchError(ContainSubstring("refuse-batch-stamp")))

		Expect(k8s.Create(ctx, cleanupPolicy("batch", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep", When: "manifest.kind == 'ConfigMap'"}}}))).To(Succeed())
		for _, n := range []string{"a", "m", "z"} {
			Eventually(func(g Gomega) {
				g.Expect(deleteOption(g, "batch-1", n)).To(Equal(map[string]any{"propagationPolicy": "Orphan"}), n)
			}).Should(Succeed())
		}
		Consistently(func(g Gomega) map[string]any { return deleteOption(g, "batch-1", "refused") }, "2s").Should(BeEmpty())
		// Reported as the failure it is, once, and never given up as a
		// write war.
		Eventually(func() string { return strings.Join(events("refused"), "\n") }).Should(And(
			ContainSubstring(v1alpha1.WriteFailedReason+": writing spec.deleteOption"), ContainSubstring("refuse-batch-stamp")))
		Expect(events("refused")).NotTo(ContainElement(ContainSubstring("Contested")))
		writeFailed := func() int32 {
			p := &v1alpha1.CleanupPolicy{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "batch"}, p)).To(Succeed())
			return p.Status.WriteFailed
		}
		Eventually(writeFailed).Should(Equal(int32(1)), "the policy's status counts the refused work")

		By("lifting the refusal: the same decision lands, with no restart and no change of policy")
		Expect(k8s.Delete(ctx, binding)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(deleteOption(g, "batch-1", "refused")).To(Equal(map[string]any{"propagationPolicy": "Orphan"}))
		}).Should(Succeed())
		Expect(events("refused")).To(HaveEach(Not(ContainSubstring("Contested"))))
		Expect(events("refused")).To(ContainElement(ContainSubstring(v1alpha1.WriteFailedReason)))
		Eventually(writeFailed).Should(BeZero(), "the write landed")

		By("deciding anew")
		p := &v1alpha1.CleanupPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "batch"}, p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.Orphaning[0].When = "manifest.metadata.name == 'cm-keep'"
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			rules, _, _ := unstructured.NestedSlice(deleteOption(g, "batch-1", "refused"), "selectivelyOrphans", "orphaningRules")
			g.Expect(rules).To(Equal([]any{map[string]any{"group": "", "resource": "configmaps", "namespace": "default", "name": "cm-keep"}}))
		}).Should(Succeed())
	})
})
