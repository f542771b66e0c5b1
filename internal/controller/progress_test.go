package controller_test

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// statusWrites are the ContentDeleteSuccess conditions written on a
// cluster's status, in the order the audit log has them: the reason and
// message of each successful status write that carried the condition.
func statusWrites(cluster string) []metav1.Condition {
	events, err := testenv.ReadAuditLog(auditLog)
	Expect(err).NotTo(HaveOccurred())
	var out []metav1.Condition
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.ObjectRef.Resource != "managedclusters" || e.ObjectRef.Subresource != "status" ||
			e.ObjectRef.Name != cluster || e.ResponseStatus.Code >= 300 {
			continue
		}
		var body struct {
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		Expect(json.Unmarshal(e.RequestObject, &body)).To(Succeed())
		for _, c := range body.Status.Conditions {
			if c.Type == v1alpha1.ContentDeleteSuccessCondition {
				out = append(out, c)
			}
		}
	}
	return out
}

func remainingMetric(cluster, step string) float64 {
	return testutil.ToFloat64(op.Metrics.Remaining.WithLabelValues(cluster, step))
}

var _ = Describe("Teardown progress", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("writes the condition once per progress interval, not per step or object; the metric follows each object; a restart writes at once", func() {
		// A progress interval longer than the spec: what is written while
		// the teardown runs is its first step, what a restart writes, and
		// the outcome.
		stopManager()
		startManagerWith(nil, operator.Options{ProgressInterval: time.Hour})
		DeferCleanup(func() {
			stopManager()
			startManager()
		})
		const cluster, works = "prog-1", 12
		stuckWorksCluster(cluster, "progress", works)

		deleteCluster(cluster)
		first := fmt.Sprintf("deleting %d manifestworks", works)
		Eventually(func(g Gomega) {
			c := contentDelete(g, cluster)
			g.Expect(c.Reason).To(Equal(v1alpha1.DeletingStageReason))
			g.Expect(c.Message).To(ContainSubstring(first))
		}).Should(Succeed())

		// The works go one by one; the metric says each, the condition
		// keeps the first message: the stage's wait that followed its
		// deletes is not written within the interval.
		const step = "stage/manifestworks"
		unstick := func(from, to int) {
			for i := from; i < to; i++ {
				name := fmt.Sprintf("w-%02d", i)
				agent.setStuck(cluster, name, false)
				Eventually(objectGone("ManifestWork", cluster, name)).Should(BeTrue())
				Eventually(func() float64 { return remainingMetric(cluster, step) }).Should(BeNumerically("==", works-i-1))
			}
		}
		unstick(0, works/2)
		Expect(contentDelete(Default, cluster).Message).To(ContainSubstring(first))

		// A restart mid-step writes the step's current progress at once.
		stopManager()
		agent.setStuck(cluster, fmt.Sprintf("w-%02d", works/2), false)
		Eventually(objectGone("ManifestWork", cluster, fmt.Sprintf("w-%02d", works/2))).Should(BeTrue())
		startManagerWith(nil, operator.Options{ProgressInterval: time.Hour})
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, cluster).Message).To(ContainSubstring(fmt.Sprintf("%d manifestworks remain", works-works/2-1)))
		}).Should(Succeed())

		unstick(works/2+1, works-1)
		agent.setStuck(cluster, fmt.Sprintf("w-%02d", works-1), false)
		clusterGone(cluster)

		// The first step and the restart's; not the outcome, since the
		// cluster goes with the operator's finalizer, its only one.
		var reasons []string
		for _, c := range statusWrites(cluster) {
			reasons = append(reasons, c.Reason)
		}
		Expect(reasons).To(Equal([]string{v1alpha1.DeletingStageReason, v1alpha1.ResourcesRemainingReason}))
	})

	It("plans again when the last of the works its stage waits for is gone, not at each one's removal; the metric follows each", func() {
		const cluster, works = "prog-3", 30
		const step = "stage/manifestworks"
		stuckWorksCluster(cluster, "progress-3", works)
		reconciles := func() float64 {
			var n float64
			for _, result := range []string{"success", "error", "requeue", "requeue_after"} {
				n += reconcileTotal(ctrlmetrics.Registry, "teardown", result)
			}
			return n
		}

		deleteCluster(cluster)
		Eventually(func() float64 { return remainingMetric(cluster, step) }).Should(BeNumerically("==", works))
		Eventually(func(g Gomega) {
			for i := range works {
				w := getWork(g, cluster, fmt.Sprintf("w-%02d", i))
				g.Expect(w.GetDeletionTimestamp()).NotTo(BeNil())
			}
		}).Should(Succeed())
		// The step has planned its wait once every work is being deleted.
		Eventually(reconciles).WithPolling(time.Second).Should(BeNumerically(">", 0))
		Consistently(reconciles, "1s").Should(BeNumerically("==", reconciles()))
		before := reconciles()

		for i := range works {
			name := fmt.Sprintf("w-%02d", i)
			agent.setStuck(cluster, name, false)
			Eventually(objectGone("ManifestWork", cluster, name)).Should(BeTrue())
			if i < works-1 {
				Eventually(func() float64 { return remainingMetric(cluster, step) }).Should(BeNumerically("==", works-i-1))
			}
		}
		clusterGone(cluster)
		// The last work's removal, the namespace, the finish, and the
		// progress written at the end of its interval: not one per work.
		Expect(reconciles() - before).To(BeNumerically("<", works/3))
	})

	It("writes the progress held back at the end of the interval, without another event", func() {
		const cluster, works = "prog-2", 4
		stuckWorksCluster(cluster, "progress-2", works)

		deleteCluster(cluster)
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, cluster).Message).To(ContainSubstring(fmt.Sprintf("%d manifestworks remain", works)))
		}).Should(Succeed())
		agent.setStuck(cluster, "w-00", false)
		// Whenever the work goes, the count is written within the
		// (default) interval: the requeue writes it.
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, cluster).Message).To(ContainSubstring(fmt.Sprintf("%d manifestworks remain", works-1)))
		}).Should(Succeed())
		for i := 1; i < works; i++ {
			agent.setStuck(cluster, fmt.Sprintf("w-%02d", i), false)
		}
		clusterGone(cluster)
	})
})

// stuckWorksCluster makes a cluster of works w-00, w-01, ... that the agent
// holds until the spec unsticks them (or ends), governed by a policy named
// env that selects the label env=env.
func stuckWorksCluster(cluster, env string, works int) {
	fleetCluster(cluster, map[string]string{"env": env}, true)
	for i := range works {
		name := fmt.Sprintf("w-%02d", i)
		work(cluster, name, nil)
		agent.setStuck(cluster, name, true)
	}
	DeferCleanup(func() {
		for i := range works {
			agent.setStuck(cluster, fmt.Sprintf("w-%02d", i), false)
		}
	})
	Expect(k8s.Create(ctx, cleanupPolicy(env, v1alpha1.CleanupPolicySpec{
		ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == '" + env + "'",
	}))).To(Succeed())
	governedBy(cluster, env)
}
