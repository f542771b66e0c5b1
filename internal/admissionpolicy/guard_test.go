package admissionpolicy_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/flowcontrol"
)

// TestGuardRestores: with the guard running, a deleted binding comes back
// within seconds, with a Warning Event on it and the metric counted; a
// binding switched to Audit, and a policy whose validation was edited,
// are put back as rendered, and so is the deleted release guard; an object
// that is as rendered is not written.
func TestGuardRestores(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	// Rendered for the test's own user, as the operator renders them for
	// itself: the other tests' requests pass as before.
	operator, err := admissionpolicy.OperatorUser(ctx, k8s)
	g.Expect(err).NotTo(HaveOccurred())
	objs := admissionpolicy.AllObjects(operator)
	g.Expect(admissionpolicy.EnsureObjects(ctx, k8s, objs)).To(Succeed())
	t.Cleanup(func() {
		for _, obj := range admissionpolicy.ProtectionObjects(operator) {
			_ = k8s.Delete(context.Background(), obj)
		}
	})

	runGuard(ctx, t, g, cancel, objs)
	name := admissionpolicy.BindingName(admissionpolicy.DeletionProtectionPolicy)
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, binding)).To(Succeed())
	before := testutil.ToFloat64(admissionpolicy.Restores.WithLabelValues("ValidatingAdmissionPolicyBinding", name, "deleted"))

	// Deleted: back within seconds, as rendered, and reported.
	g.Expect(k8s.Delete(ctx, binding)).To(Succeed())
	back := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, back)).To(Succeed())
		g.Expect(back.UID).NotTo(Equal(binding.UID))
	}).WithTimeout(enforcementTimeout).Should(Succeed())
	g.Expect(back.Spec.PolicyName).To(Equal(admissionpolicy.DeletionProtectionPolicy))
	g.Expect(back.Spec.ValidationActions).To(Equal([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}))
	g.Eventually(func() float64 {
		return testutil.ToFloat64(admissionpolicy.Restores.WithLabelValues("ValidatingAdmissionPolicyBinding", name, "deleted"))
	}).Should(Equal(before + 1))
	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(k8s.List(ctx, &events)).To(Succeed())
		found := false
		for _, e := range events.Items {
			if e.Reason == admissionpolicy.RestoredReason && e.Regarding.Name == name && e.Type == "Warning" {
				g.Expect(e.Note).To(ContainSubstring("ValidatingAdmissionPolicyBinding " + name + " was deleted"))
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "no %s Event on %s", admissionpolicy.RestoredReason, name)
	}).WithTimeout(enforcementTimeout).Should(Succeed())

	// Changed to Audit: put back to Deny.
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, back)).To(Succeed())
	back.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
	g.Expect(k8s.Update(ctx, back)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, back)).To(Succeed())
		g.Expect(back.Spec.ValidationActions).To(Equal([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}))
	}).WithTimeout(enforcementTimeout).Should(Succeed())

	// A policy's validation edited: put back.
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.ProtectionMarkPolicy}, p)).To(Succeed())
	want := p.Spec.Validations[0].Expression
	editedPolicy := p.DeepCopy()
	editedPolicy.Spec.Validations[0].Expression = "true"
	// A merge patch: the API server writes the policy's type checking in
	// its status meanwhile, which an update would conflict with.
	g.Expect(k8s.Patch(ctx, editedPolicy, client.MergeFrom(p))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.ProtectionMarkPolicy}, p)).To(Succeed())
		g.Expect(p.Spec.Validations[0].Expression).To(Equal(want))
	}).WithTimeout(enforcementTimeout).Should(Succeed())

	// The release guard, deleted: back as well.
	release := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.ReleasePolicy}, release)).To(Succeed())
	releaseBefore := testutil.ToFloat64(admissionpolicy.Restores.WithLabelValues("ValidatingAdmissionPolicy", admissionpolicy.ReleasePolicy, "deleted"))
	g.Expect(k8s.Delete(ctx, release)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.ReleasePolicy}, cur)).To(Succeed())
		g.Expect(cur.UID).NotTo(Equal(release.UID))
		g.Expect(cur.Spec.Validations).To(HaveLen(len(release.Spec.Validations)))
	}).WithTimeout(enforcementTimeout).Should(Succeed())
	g.Eventually(func() float64 {
		return testutil.ToFloat64(admissionpolicy.Restores.WithLabelValues("ValidatingAdmissionPolicy", admissionpolicy.ReleasePolicy, "deleted"))
	}).Should(Equal(releaseBefore + 1))

	// What is as rendered is left alone: another binding was never written.
	other := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.BindingName(admissionpolicy.DeletingWorkPolicy)}, other)).To(Succeed())
	g.Consistently(func(g Gomega) {
		cur := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(other), cur)).To(Succeed())
		g.Expect(cur.ResourceVersion).To(Equal(other.ResourceVersion))
	}, "2s").Should(Succeed())
}

// runGuard runs a manager with a guard of objs until ctx ends; cancel ends
// it. It returns once deletes reach the guard as watch events, and the
// guard stops, at the test's cleanup, before cleanups registered earlier
// delete the objects rendered for it.
func runGuard(ctx context.Context, t *testing.T, g *WithT, cancel context.CancelFunc, objs []client.Object) {
	opts := ctrl.Options{Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	opts.Controller.SkipNameValidation = ptr.To(true)
	opts.Logger = testr.New(t)
	mgr, err := ctrl.NewManager(testEnv.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())
	guard := &admissionpolicy.Guard{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder(v1alpha1.FieldManager), Objects: objs,
		Restored: func(kind, name, change string) {
			admissionpolicy.Restores.WithLabelValues(kind, name, change).Inc()
		}}
	g.Expect(guard.SetupWithManager(mgr)).To(Succeed())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
}

// TestGuardRestoresFlowControl: with the guard running, the operator's
// FlowSchema and priority level, each deleted and then changed, are put
// back as rendered and counted.
func TestGuardRestoresFlowControl(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	objs := flowcontrol.Objects("cleanup-guard-test", "operator")
	for _, obj := range objs {
		g.Expect(k8s.Create(ctx, obj.DeepCopyObject().(client.Object))).To(Succeed())
	}
	t.Cleanup(func() {
		for _, obj := range objs {
			_ = k8s.Delete(context.Background(), obj)
		}
	})
	runGuard(ctx, t, g, cancel, objs)
	restores := func(kind, change string) func() float64 {
		return func() float64 {
			return testutil.ToFloat64(admissionpolicy.Restores.WithLabelValues(kind, flowcontrol.Name, change))
		}
	}
	key := client.ObjectKey{Name: flowcontrol.Name}

	// The FlowSchema, deleted: back, as rendered.
	schema := &flowcontrolv1.FlowSchema{}
	g.Expect(k8s.Get(ctx, key, schema)).To(Succeed())
	before := restores("FlowSchema", "deleted")()
	g.Expect(k8s.Delete(ctx, schema)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &flowcontrolv1.FlowSchema{}
		g.Expect(k8s.Get(ctx, key, cur)).To(Succeed())
		g.Expect(cur.UID).NotTo(Equal(schema.UID))
		g.Expect(cur.Spec.Rules[0].Subjects[0].ServiceAccount.Namespace).To(Equal("cleanup-guard-test"))
	}).WithTimeout(enforcementTimeout).Should(Succeed())
	g.Eventually(restores("FlowSchema", "deleted")).Should(Equal(before + 1))

	// The FlowSchema, changed: its precedence put back.
	before = restores("FlowSchema", "changed")()
	// A merge patch, as a person's edit: the API server writes the
	// FlowSchema's status meanwhile, which an update would conflict with.
	g.Expect(k8s.Get(ctx, key, schema)).To(Succeed())
	edited := schema.DeepCopy()
	edited.Spec.MatchingPrecedence = 9900
	g.Expect(k8s.Patch(ctx, edited, client.MergeFrom(schema))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key, schema)).To(Succeed())
		g.Expect(schema.Spec.MatchingPrecedence).To(Equal(int32(flowcontrol.MatchingPrecedence)))
	}).WithTimeout(enforcementTimeout).Should(Succeed())
	g.Eventually(restores("FlowSchema", "changed")).Should(Equal(before + 1))

	// The priority level, deleted: back.
	level := &flowcontrolv1.PriorityLevelConfiguration{}
	g.Expect(k8s.Get(ctx, key, level)).To(Succeed())
	before = restores("PriorityLevelConfiguration", "deleted")()
	g.Expect(k8s.Delete(ctx, level)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &flowcontrolv1.PriorityLevelConfiguration{}
		g.Expect(k8s.Get(ctx, key, cur)).To(Succeed())
		g.Expect(cur.UID).NotTo(Equal(level.UID))
	}).WithTimeout(enforcementTimeout).Should(Succeed())
	g.Eventually(restores("PriorityLevelConfiguration", "deleted")).Should(Equal(before + 1))

	// The priority level, changed: its shares put back.
	before = restores("PriorityLevelConfiguration", "changed")()
	g.Expect(k8s.Get(ctx, key, level)).To(Succeed())
	editedLevel := level.DeepCopy()
	editedLevel.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](200)
	g.Expect(k8s.Patch(ctx, editedLevel, client.MergeFrom(level))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key, level)).To(Succeed())
		g.Expect(*level.Spec.Limited.NominalConcurrencyShares).To(Equal(int32(flowcontrol.NominalConcurrencyShares)))
	}).WithTimeout(enforcementTimeout).Should(Succeed())
	g.Eventually(restores("PriorityLevelConfiguration", "changed")).Should(Equal(before + 1))
}
