package controller_test

import (
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// series gathers a collector's series as "name{k=v,...}" -> value, without
// creating any (WithLabelValues would).
func series(c prometheus.Collector) map[string]float64 {
	reg := prometheus.NewPedanticRegistry()
	Expect(reg.Register(c)).To(Succeed())
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// ofCluster keeps the series that name the cluster.
func ofCluster(all map[string]float64, cluster string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.Contains(k, "cluster="+cluster+",") || strings.Contains(k, "cluster="+cluster+"}") {
			out[k] = v
		}
	}
	return out
}

// ofPolicy keeps the series that name the policy.
func ofPolicy(all map[string]float64, policy string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.Contains(k, "policy="+policy+",") || strings.Contains(k, "policy="+policy+"}") {
			out[k] = v
		}
	}
	return out
}

var _ = Describe("Metrics", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("exports a cluster in cleanup with its deletion time, its policy's timeout and its step, and drops it at the end", func() {
		fleetCluster("met-1", nil, true)
		work("met-1", "stuck", nil)
		agent.setStuck("met-1", "stuck", true)
		Expect(k8s.Create(ctx, cleanupPolicy("met-required", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired, Timeout: &metav1.Duration{Duration: 2 * time.Second}},
		}))).To(Succeed())
		governedBy("met-1", "met-required")
		Expect(ofCluster(series(op.Metrics.ClusterStep), "met-1")).To(BeEmpty(), "no series before the deletion")

		deleteCluster("met-1")
		deleted := getClusterNow("met-1").GetDeletionTimestamp()
		Expect(deleted).NotTo(BeNil())
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "met-1").Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(ofCluster(series(op.Metrics.ClusterStep), "met-1")).To(Equal(map[string]float64{
				"cleanup_cluster_step{cluster=met-1,step=CleanupFailed}": 1,
			}), "one series, of the step the condition names")
		}).Should(Succeed())
		Expect(ofCluster(series(op.Metrics.ClusterDeletion), "met-1")).To(Equal(map[string]float64{
			"cleanup_cluster_deletion_timestamp_seconds{cluster=met-1,policy=met-required,strategy=Required}": float64(deleted.Unix()),
		}))
		Expect(ofCluster(series(op.Metrics.ClusterTimeout), "met-1")).To(Equal(map[string]float64{
			"cleanup_cluster_timeout_seconds{cluster=met-1,policy=met-required,strategy=Required}": 2,
		}))

		agent.setStuck("met-1", "stuck", false)
		clusterGone("met-1")
		Eventually(func(g Gomega) {
			for _, c := range []prometheus.Collector{op.Metrics.ClusterStep, op.Metrics.ClusterDeletion, op.Metrics.ClusterTimeout} {
				g.Expect(ofCluster(series(c), "met-1")).To(BeEmpty())
			}
		}).Should(Succeed())
	})

	It("drops a cluster whose finalizer was removed by hand mid-cleanup", func() {
		fleetCluster("met-3", nil, true)
		work("met-3", "stuck", nil)
		agent.setStuck("met-3", "stuck", true)
		Expect(k8s.Create(ctx, cleanupPolicy("met-hand", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired, Timeout: &metav1.Duration{Duration: time.Hour}},
		}))).To(Succeed())
		governedBy("met-3", "met-hand")
		deleteCluster("met-3")
		Eventually(func() map[string]float64 { return ofCluster(series(op.Metrics.ClusterStep), "met-3") }).ShouldNot(BeEmpty())

		removeFinalizerByHand(getClusterNow("met-3"), v1alpha1.ClusterCleanupFinalizer)
		clusterGone("met-3")
		Eventually(func(g Gomega) {
			for _, c := range []prometheus.Collector{op.Metrics.ClusterStep, op.Metrics.ClusterDeletion, op.Metrics.ClusterTimeout} {
				g.Expect(ofCluster(series(c), "met-3")).To(BeEmpty())
			}
		}).Should(Succeed())
		agent.setStuck("met-3", "stuck", false)
	})

	It("exports a policy's conditions and counts, follows them, and drops them when the policy is gone", func() {
		fleetCluster("met-2", nil, true)
		Expect(k8s.Create(ctx, cleanupPolicy("met-unserved", v1alpha1.CleanupPolicySpec{
			MonitoredResources: monitors("example.com", "v1", "widgets"),
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(ofPolicy(series(op.Metrics.PolicyCondition), "met-unserved")).To(Equal(map[string]float64{
				"cleanup_policy_condition{policy=met-unserved,reason=ResourceNotServed,type=Ready}":   0,
				"cleanup_policy_condition{policy=met-unserved,reason=ResourceNotServed,type=Stalled}": 1,
				"cleanup_policy_condition{policy=met-unserved,reason=,type=Reconciling}":              0,
			}))
		}).Should(Succeed())

		By("following the policy once it is fixed")
		p := &v1alpha1.CleanupPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "met-unserved"}, p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.MonitoredResources = nil
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(ofPolicy(series(op.Metrics.PolicyCondition), "met-unserved")).To(Equal(map[string]float64{
				"cleanup_policy_condition{policy=met-unserved,reason=Succeeded,type=Ready}": 1,
				"cleanup_policy_condition{policy=met-unserved,reason=,type=Stalled}":        0,
				"cleanup_policy_condition{policy=met-unserved,reason=,type=Reconciling}":    0,
			}), "a condition's series of the old reason goes")
			clusters := ofPolicy(series(op.Metrics.PolicyClusters), "met-unserved")
			g.Expect(clusters).To(HaveKeyWithValue("cleanup_policy_clusters{field=governedClusters,policy=met-unserved}", BeNumerically(">=", 1)))
			g.Expect(clusters).To(HaveKeyWithValue("cleanup_policy_clusters{field=matchedClusters,policy=met-unserved}", BeNumerically(">=", 1)))
			g.Expect(ofPolicy(series(op.Metrics.PolicyObjects), "met-unserved")).To(HaveKeyWithValue(
				"cleanup_policy_objects{field=contested,policy=met-unserved}", BeZero()))
		}).Should(Succeed())

		By("following a suspended policy")
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "met-unserved"}, p)).To(Succeed())
		before = p.DeepCopy()
		p.Spec.Suspend = true
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(ofPolicy(series(op.Metrics.PolicyCondition), "met-unserved")).To(HaveKeyWithValue(
				"cleanup_policy_condition{policy=met-unserved,reason=Suspended,type=Ready}", 1.0))
		}).Should(Succeed())

		// A suspended policy keeps its finalizers: resume it, then delete it.
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "met-unserved"}, p)).To(Succeed())
		before = p.DeepCopy()
		p.Spec.Suspend = false
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(ofPolicy(series(op.Metrics.PolicyCondition), "met-unserved")).To(HaveKeyWithValue(
				"cleanup_policy_condition{policy=met-unserved,reason=Succeeded,type=Ready}", 1.0))
		}).Should(Succeed())
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, c := range []prometheus.Collector{op.Metrics.PolicyCondition, op.Metrics.PolicyClusters, op.Metrics.PolicyObjects} {
				g.Expect(ofPolicy(series(c), "met-unserved")).To(BeEmpty())
			}
		}).Should(Succeed())
	})
})
