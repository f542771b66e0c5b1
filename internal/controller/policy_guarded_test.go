package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// guardedOf expects the policy's Guarded condition with the status and
// reason, stamped with its generation, and returns its message.
func guardedOf(g Gomega, name string, want metav1.ConditionStatus, reason string) string {
	p := status(name)(g)
	c := condition(p, v1alpha1.GuardedCondition)
	g.Expect(c).NotTo(BeNil(), "no %s condition on %s", v1alpha1.GuardedCondition, name)
	g.Expect(c.Status).To(Equal(want))
	g.Expect(c.Reason).To(Equal(reason))
	g.Expect(c.ObservedGeneration).To(Equal(p.Generation))
	return c.Message
}

// kstatusOf is what kstatus (Flux, kubectl wait, Argo CD's reading of
// it) says of the policy.
func kstatusOf(g Gomega, name string) kstatus.Status {
	p := &v1alpha1.CleanupPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, p)).To(Succeed())
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

var _ = Describe("The guard's condition on every policy", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("is True while the guard runs, names the last restore once, and is written once for it", func() {
		Expect(k8s.Create(ctx, cleanupPolicy("guarded-a", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("guarded-b", v1alpha1.CleanupPolicySpec{Priority: 10, Suspend: true}))).To(Succeed())
		names := []string{"guarded-a", "guarded-b"}
		for _, name := range names {
			Eventually(func(g Gomega) {
				// The suite's manager may have put back an object an earlier
				// spec changed: the message says so, or says none.
				msg := guardedOf(g, name, metav1.ConditionTrue, v1alpha1.GuardsInPlaceReason)
				g.Expect(msg).To(HavePrefix("the operator puts back its admission policies"))
			}).Should(Succeed())
		}

		By("letting the guard put back, first, what it finds changed as it starts")
		// The guard of the manager started for this spec may restore
		// objects as it starts (the spec's log has shown two policies
		// found changed); a restore after the deletion below would be the
		// last one the condition names. The guard is settled when the
		// message stays the same for two seconds.
		Eventually(func(g Gomega) {
			msg := guardedOf(g, names[0], metav1.ConditionTrue, v1alpha1.GuardsInPlaceReason)
			g.Consistently(func(g Gomega) string {
				return guardedOf(g, names[0], metav1.ConditionTrue, v1alpha1.GuardsInPlaceReason)
			}, "2s", "100ms").Should(Equal(msg))
		}).Should(Succeed())

		By("deleting a binding the deletion protection relies on")
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		bindingName := admissionpolicy.BindingName(admissionpolicy.DeletionProtectionPolicy)
		Expect(k8s.Get(ctx, client.ObjectKey{Name: bindingName}, binding)).To(Succeed())
		deleted := time.Now()
		Expect(k8s.Delete(ctx, binding)).To(Succeed())
		prefix := "ValidatingAdmissionPolicyBinding " + bindingName + " was deleted; put back at "
		for _, name := range names {
			Eventually(func(g Gomega) {
				msg := guardedOf(g, name, metav1.ConditionTrue, v1alpha1.GuardsInPlaceReason)
				g.Expect(msg).To(ContainSubstring(prefix))
				at, err := time.Parse(time.RFC3339, strings.TrimSuffix(msg[strings.Index(msg, prefix)+len(prefix):], "."))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(at).To(BeTemporally("~", deleted, time.Minute))
			}).Should(Succeed())
		}
		Expect(condition(status("guarded-a")(Default), v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.SucceededReason))
		Expect(condition(status("guarded-b")(Default), v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.SuspendedReason))

		By("writing the condition once for the restore")
		// Once a restore: a policy written again names another restore
		// (the guard may put back an object the suite's manager, started
		// for this spec, met changed), never the same one twice.
		type written struct{ version, message string }
		read := func(g Gomega, name string) written {
			p := status(name)(g)
			return written{p.ResourceVersion, condition(p, v1alpha1.GuardedCondition).Message}
		}
		last := map[string]written{}
		for _, name := range names {
			last[name] = read(Default, name)
		}
		Consistently(func(g Gomega) {
			for _, name := range names {
				now := read(g, name)
				if now.version != last[name].version {
					g.Expect(now.message).NotTo(Equal(last[name].message), "%s written again for the same restore", name)
				}
				last[name] = now
			}
		}, "2s").Should(Succeed())
	})

	Context("when the operator lacks its bootstrap role", func() {
		BeforeEach(func() {
			stopManager()
			cfg, err := env.OperatorConfig(ctx)
			Expect(err).NotTo(HaveOccurred())
			bootstrap := &rbacv1.ClusterRoleBinding{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "bootstrap-role-" + testenv.OperatorUser}, bootstrap)).To(Succeed())
			Expect(k8s.Delete(ctx, bootstrap)).To(Succeed())
			// The authorizer reads bindings from its own cache.
			Eventually(func(g Gomega) {
				review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: testenv.OperatorUser,
					ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "admissionregistration.k8s.io",
						Resource: "validatingadmissionpolicybindings", Verb: "create"}}}
				g.Expect(k8s.Create(ctx, review)).To(Succeed())
				g.Expect(review.Status.Allowed).To(BeFalse())
			}).Should(Succeed())
			startManagerAs(cfg)
			DeferCleanup(func() {
				stopManager()
				bootstrap.ResourceVersion = ""
				Expect(k8s.Create(ctx, bootstrap)).To(Succeed())
				startManager()
			})
		})

		It("is False on every policy, naming the missing rights, and leaves Ready and kstatus alone", func() {
			Expect(k8s.Create(ctx, cleanupPolicy("unguarded-a", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
			Expect(k8s.Create(ctx, cleanupPolicy("unguarded-b", v1alpha1.CleanupPolicySpec{Priority: 10}))).To(Succeed())
			for _, name := range []string{"unguarded-a", "unguarded-b"} {
				Eventually(func(g Gomega) {
					msg := guardedOf(g, name, metav1.ConditionFalse, v1alpha1.GuardUnrestorableReason)
					g.Expect(msg).To(ContainSubstring("the operator may not "))
					g.Expect(msg).To(ContainSubstring("create validatingadmissionpolicybindings.admissionregistration.k8s.io"))
					g.Expect(msg).To(ContainSubstring("cleanup-operator-bootstrap-role"))
					g.Expect(condition(status(name)(g), v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.SucceededReason))
					g.Expect(kstatusOf(g, name)).To(Equal(kstatus.CurrentStatus))
				}).Should(Succeed())
			}
		})
	})
})
