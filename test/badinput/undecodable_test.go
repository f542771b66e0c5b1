package badinput

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

const crdName = "cleanuppolicies.cleanup.fleetops.dev"

// The API server stored `timeout: soon` while the CRD said only `type:
// string`. Once the CRD refuses it, the stored policy stays as it was (and
// may still be updated with it unchanged): the operator must read every
// other policy, report this one, and hold the clusters it governs.
var _ = Describe("A stored policy the operator cannot decode", Ordered, func() {
	const (
		broken  = "broken"
		working = "working"
		held    = "held-by-broken"
		cleaned = "cleaned-by-working"
	)

	BeforeAll(func() {
		if running != nil {
			stopManager()
		}
		// Without the webhook: the API server alone decides what is stored.
		webhookOff()
		DeferCleanup(webhookOn)

		By("installing the CRD as it was before the timeout was validated")
		current := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: crdName}, current)).To(Succeed())
		validated := current.Spec.DeepCopy()
		old := current.DeepCopy()
		for i := range old.Spec.Versions {
			rs := old.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["removeStrategy"]
			timeout := rs.Properties["timeout"]
			Expect(timeout.XValidations).NotTo(BeEmpty(), "the CRD does not validate the timeout")
			timeout.XValidations, timeout.MaxLength = nil, nil
			rs.Properties["timeout"] = timeout
			old.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"].Properties["removeStrategy"] = rs
		}
		Expect(k8s.Update(ctx, old)).To(Succeed())
		Eventually(timeoutProbe).Should(Succeed())

		By("storing a policy with timeout: soon, and the clusters of two policies")
		Expect(createPolicy(broken, spec(`
clusterSelector: "cluster.metadata.labels[?'team'].orValue('') == 'broken'"
removeStrategy: {default: BestEffort, timeout: soon}`))).To(Succeed())
		Expect(createPolicy(working, spec(`
clusterSelector: "cluster.metadata.labels[?'team'].orValue('') == 'working'"
removeStrategy: {default: BestEffort, timeout: 5m}`))).To(Succeed())
		// Governed by the broken policy before the operator's restart.
		fleetCluster(held, map[string]string{"team": "broken"},
			map[string]string{v1alpha1.GoverningPolicyAnnotation: broken}, v1alpha1.ClusterCleanupFinalizer)
		fleetCluster(cleaned, map[string]string{"team": "working"}, nil)

		By("installing the CRD that validates the timeout")
		Eventually(func() error {
			Expect(k8s.Get(ctx, client.ObjectKey{Name: crdName}, current)).To(Succeed())
			current.Spec = *validated
			return k8s.Update(ctx, current)
		}).Should(Succeed())
		Eventually(timeoutProbe).ShouldNot(Succeed())

		stored := cleanupPolicy(broken)
		Expect(k8s.Get(ctx, client.ObjectKey{Name: broken}, stored)).To(Succeed())
		timeout, _, _ := unstructured.NestedString(stored.Object, "spec", "removeStrategy", "timeout")
		Expect(timeout).To(Equal("soon"))
		// What blinded the operator: a typed list fails as a whole.
		var typed v1alpha1.CleanupPolicyList
		Expect(k8s.List(ctx, &typed)).To(MatchError(ContainSubstring("soon")))

		startManager()
	})

	It("reports the policy InvalidSpec, naming the field, with an Event", func() {
		Eventually(func(g Gomega) {
			ready := policyCondition(broken, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.InvalidSpecReason))
			g.Expect(ready.Message).To(ContainSubstring("spec.removeStrategy.timeout"))
			g.Expect(ready.Message).To(ContainSubstring(`"soon"`))
			stalled := policyCondition(broken, v1alpha1.StalledCondition)
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Eventually(func() []string {
			var events eventsv1.EventList
			Expect(k8s.List(ctx, &events)).To(Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Regarding.Kind == "CleanupPolicy" && e.Regarding.Name == broken && e.Reason == v1alpha1.InvalidSpecReason {
					notes = append(notes, e.Note)
				}
			}
			return notes
		}).Should(ContainElement(ContainSubstring("spec.removeStrategy.timeout")))
	})

	It("governs with every other policy", func() {
		Eventually(func(g Gomega) {
			ready := policyCondition(working, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Eventually(func() map[string]string {
			mc := managedCluster(cleaned)
			Expect(k8s.Get(ctx, client.ObjectKey{Name: cleaned}, mc)).To(Succeed())
			return mc.GetAnnotations()
		}).Should(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, working))
	})

	It("cleans up the other policy's cluster and holds the broken policy's, naming the field", func() {
		Expect(k8s.Delete(ctx, managedCluster(cleaned))).To(Succeed())
		Expect(k8s.Delete(ctx, managedCluster(held))).To(Succeed())

		Eventually(func() bool { return contentGone(cleaned) }).Should(BeTrue())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: cleaned}, managedCluster(cleaned)))
		}).Should(BeTrue())

		Eventually(func(g Gomega) {
			cond := clusterCondition(held)
			g.Expect(cond).NotTo(BeNil())
			// Held before its first write: not begun, for the blast radius.
			g.Expect(cond.Status).To(Equal(metav1.ConditionUnknown))
			g.Expect(cond.Message).To(ContainSubstring("held, nothing is deleted"))
			g.Expect(cond.Message).To(ContainSubstring("CleanupPolicy " + broken))
			g.Expect(cond.Message).To(ContainSubstring("spec.removeStrategy.timeout"))
		}).Should(Succeed())
		Expect(contentIntact(held)).To(Succeed())
		mc := managedCluster(held)
		Expect(k8s.Get(ctx, client.ObjectKey{Name: held}, mc)).To(Succeed())
		Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, broken))
	})

	It("goes on with the held cluster once the policy is fixed, through the webhook", func() {
		webhookOn()
		By("changing a label: the spec is the same, the webhook lets it through")
		// Each update again if the operator changed the policy meanwhile
		// (its in-use finalizer).
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := cleanupPolicy(broken)
			Expect(k8s.Get(ctx, client.ObjectKey{Name: broken}, p)).To(Succeed())
			p.SetLabels(map[string]string{"owner": "platform"})
			return k8s.Update(ctx, p)
		})).To(Succeed())

		By("fixing the timeout: the webhook checks the new spec whole")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := cleanupPolicy(broken)
			Expect(k8s.Get(ctx, client.ObjectKey{Name: broken}, p)).To(Succeed())
			Expect(unstructured.SetNestedField(p.Object, "5m", "spec", "removeStrategy", "timeout")).To(Succeed())
			return k8s.Update(ctx, p)
		})).To(Succeed())

		Eventually(func(g Gomega) {
			ready := policyCondition(broken, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Eventually(func() bool { return contentGone(held) }).Should(BeTrue())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: held}, managedCluster(held)))
		}).Should(BeTrue())
	})
})

// timeoutProbe creates, in a dry run, a policy whose timeout is a word.
func timeoutProbe() error {
	p := cleanupPolicy("timeout-probe")
	p.Object["spec"] = map[string]any{"removeStrategy": map[string]any{"default": "Required", "timeout": "soon"}}
	err := k8s.Create(ctx, p, client.DryRunAll)
	if err != nil && !strings.Contains(err.Error(), "spec.removeStrategy.timeout") {
		Fail("the dry run was refused for another reason: " + err.Error())
	}
	return err
}
