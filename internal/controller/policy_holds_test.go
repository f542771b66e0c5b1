package controller_test

import (
	"fmt"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// withoutWebhook deletes the webhook configuration until the spec ends, so
// that a policy the webhook would refuse reaches the API server.
func withoutWebhook() {
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(k8s.List(ctx, &list)).To(Succeed())
	Expect(list.Items).To(HaveLen(1))
	saved := list.Items[0].DeepCopy()
	Expect(k8s.Delete(ctx, &list.Items[0])).To(Succeed())
	DeferCleanup(func() {
		saved.ResourceVersion = ""
		Expect(k8s.Create(ctx, saved)).To(Succeed())
		// The API server reads webhook configurations from its own cache.
		Eventually(func() error {
			err := k8s.Create(ctx, cleanupPolicy("probe", v1alpha1.CleanupPolicySpec{ClusterSelector: "x"}))
			if err == nil {
				_ = k8s.Delete(ctx, cleanupPolicy("probe", v1alpha1.CleanupPolicySpec{}))
				return fmt.Errorf("webhook not active yet")
			}
			return nil
		}).Should(Succeed())
	})
}

// stalledWith expects the policy's Ready False and Stalled True, both with
// the reason, and returns Ready's message.
func stalledWith(g Gomega, p *v1alpha1.CleanupPolicy, reason string) string {
	ready := condition(p, v1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(reason))
	stalled := condition(p, v1alpha1.StalledCondition)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stalled.Reason).To(Equal(reason))
	return ready.Message
}

var _ = Describe("What holds a policy that compiles", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	Context("when the operator's namespace does not exist", func() {
		const missing = "holds-missing-records"

		BeforeEach(func() {
			logs.start()
			stopManager()
			startManagerWith(nil, operator.Options{Records: teardown.RecordOptions{Namespace: missing}})
			DeferCleanup(func() {
				stopManager()
				startManager()
			})
		})

		It("says so once at start and in every policy's Ready, until it is created", func() {
			Expect(k8s.Create(ctx, managedCluster("ns-hold-1", map[string]string{"env": "prod"}))).To(Succeed())
			Expect(k8s.Create(ctx, cleanupPolicy("ns-hold-a", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
			Expect(k8s.Create(ctx, cleanupPolicy("ns-hold-b", v1alpha1.CleanupPolicySpec{Priority: 10}))).To(Succeed())
			for _, name := range []string{"ns-hold-a", "ns-hold-b"} {
				Eventually(func(g Gomega) {
					msg := stalledWith(g, status(name)(g), v1alpha1.OperatorNamespaceMissingReason)
					g.Expect(msg).To(ContainSubstring("the operator's namespace " + missing + " does not exist"))
					g.Expect(msg).To(ContainSubstring("--operator-namespace"))
				}).Should(Succeed())
			}
			Expect(logs.matching(record.NamespaceMissingMessage, "namespace", missing)).To(HaveLen(1))

			By("going Ready once the namespace is created")
			Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: missing}})).To(Succeed())
			for _, name := range []string{"ns-hold-a", "ns-hold-b"} {
				Eventually(func(g Gomega) {
					p := status(name)(g)
					g.Expect(condition(p, v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.SucceededReason))
					g.Expect(condition(p, v1alpha1.StalledCondition)).To(BeNil())
				}).Should(Succeed())
			}
			Expect(logs.matching(record.NamespaceMissingMessage, "namespace", missing)).To(HaveLen(1))
		})
	})

	Context("when a broken policy reaches the API server without the webhook", func() {
		BeforeEach(withoutWebhook)

		It("logs it once per generation, without a reconcile error, however many cluster events follow", func() {
			logs.start()
			Expect(k8s.Create(ctx, managedCluster("burst-0", map[string]string{"env": "prod"}))).To(Succeed())
			Eventually(func() error {
				return k8s.Create(ctx, cleanupPolicy("burst", v1alpha1.CleanupPolicySpec{
					ClusterSelector: "cluster.metadata.lables['env'] == 'prod'",
				}))
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				stalledWith(g, status("burst")(g), v1alpha1.InvalidCELExpressionReason)
			}).Should(Succeed())

			By("a burst of cluster events, each bringing the policy back")
			reconciles := func() float64 {
				return reconcileTotal(ctrlmetrics.Registry, "cleanuppolicy", "success")
			}
			before, bumps := reconciles(), 0
			Eventually(func() float64 {
				bumps++
				mc := managedCluster("", nil)
				Expect(k8s.Get(ctx, client.ObjectKey{Name: "burst-0"}, mc)).To(Succeed())
				mc.SetLabels(map[string]string{"env": "prod", "bump": fmt.Sprint(bumps)})
				Expect(k8s.Update(ctx, mc)).To(Succeed())
				return reconciles() - before
			}).Should(BeNumerically(">=", 10))

			invalid := "policy invalid: it governs nothing new and the clusters it governs are held"
			lines := logs.matching(invalid, "policy", "burst")
			Expect(lines).To(HaveLen(1))
			Expect(lines[0].value("fields")).To(Equal([]string{"spec.clusterSelector"}))
			Expect(lines[0].value("generation")).To(BeEquivalentTo(1))
			for _, l := range logs.all() {
				Expect(l.msg).NotTo(Equal("Reconciler error"), "%v %v", l.err, l.kv)
			}

			By("logging the next generation, still broken, once")
			p := &v1alpha1.CleanupPolicy{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "burst"}, p)).To(Succeed())
			before2 := p.DeepCopy()
			p.Spec.ClusterSelector = "cluster.metadata.lables['env'] == 'dev'"
			Expect(k8s.Patch(ctx, p, client.MergeFrom(before2))).To(Succeed())
			Eventually(func() []capturedLine { return logs.matching(invalid, "policy", "burst") }).Should(HaveLen(2))
			Expect(logs.matching(invalid, "policy", "burst")[1].value("generation")).To(BeEquivalentTo(2))
		})
	})
})

// reconcileTotal is controller-runtime's count of the controller's
// reconciles that ended with result.
func reconcileTotal(g prometheus.Gatherer, name, result string) float64 {
	families, err := g.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller"] == name && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
