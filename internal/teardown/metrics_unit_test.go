package teardown

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// gathered is every series of the collectors, "name{k=v,...}" -> value.
func gathered(t *testing.T, cs ...prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
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

func deletedCluster(name string, at time.Time) *unstructured.Unstructured {
	mc := &unstructured.Unstructured{}
	mc.SetName(name)
	ts := metav1.NewTime(at)
	mc.SetDeletionTimestamp(&ts)
	return mc
}

func TestClusterSeriesFollowTheCleanup(t *testing.T) {
	g := NewWithT(t)
	m := metrics.NewMetrics()
	mc := deletedCluster("c1", time.Unix(1000, 0))
	plan := &decision.Plan{Cluster: "c1", Policy: "prod", Strategy: v1alpha1.RemoveStrategyRequired, Timeout: "30m0s"}
	cluster := func() map[string]float64 {
		return gathered(t, m.InCleanup, m.ClusterStep, m.ClusterDeletion, m.ClusterTimeout)
	}
	teardowns := NewTeardowns(m)
	st := teardowns.of("c1", "u1")
	observe := func(plan *decision.Plan, reason string) {
		st.reported(mc, plan, &decision.Report{Reason: reason})
	}

	observe(plan, v1alpha1.SignallingReason)
	g.Expect(cluster()).To(Equal(map[string]float64{
		"cleanup_clusters_in_cleanup{step=Signalling}":                                         1,
		"cleanup_cluster_step{cluster=c1,step=Signalling}":                                     1,
		"cleanup_cluster_deletion_timestamp_seconds{cluster=c1,policy=prod,strategy=Required}": 1000,
		"cleanup_cluster_timeout_seconds{cluster=c1,policy=prod,strategy=Required}":            1800,
	}))

	// A new step replaces the step's series.
	observe(plan, v1alpha1.CleanupFailedReason)
	g.Expect(cluster()).To(Equal(map[string]float64{
		"cleanup_clusters_in_cleanup{step=Signalling}":                                         0,
		"cleanup_clusters_in_cleanup{step=CleanupFailed}":                                      1,
		"cleanup_cluster_step{cluster=c1,step=CleanupFailed}":                                  1,
		"cleanup_cluster_deletion_timestamp_seconds{cluster=c1,policy=prod,strategy=Required}": 1000,
		"cleanup_cluster_timeout_seconds{cluster=c1,policy=prod,strategy=Required}":            1800,
	}))

	// A report without a plan (a read that failed) keeps the policy, strategy and timeout.
	observe(nil, v1alpha1.CleanupFailedReason)
	g.Expect(cluster()).To(HaveKeyWithValue("cleanup_cluster_timeout_seconds{cluster=c1,policy=prod,strategy=Required}", 1800.0))

	// A plan held before a policy decides drops the policy's series, and exports no timeout.
	observe(&decision.Plan{Cluster: "c1", Held: "does not compile"}, v1alpha1.CleanupFailedReason)
	g.Expect(cluster()).To(Equal(map[string]float64{
		"cleanup_clusters_in_cleanup{step=Signalling}":                             0,
		"cleanup_clusters_in_cleanup{step=CleanupFailed}":                          1,
		"cleanup_cluster_step{cluster=c1,step=CleanupFailed}":                      1,
		"cleanup_cluster_deletion_timestamp_seconds{cluster=c1,policy=,strategy=}": 1000,
	}))

	// A hold by the policy's blast radius is counted once, until it ends.
	observe(plan, v1alpha1.BlastRadiusExceededReason)
	observe(plan, v1alpha1.BlastRadiusExceededReason)
	g.Expect(gathered(t, m.BlastRadiusHeld)).To(Equal(map[string]float64{"cleanup_blast_radius_held_teardowns{policy=prod}": 1}))

	// The end of the teardown drops every series of the cluster.
	observe(plan, v1alpha1.DeletingStageReason)
	st.observeRemaining("stage/manifestworks", 3)
	g.Expect(m.Exports("c1")).To(BeTrue())
	teardowns.end("u1", true)
	g.Expect(cluster()).To(Equal(map[string]float64{
		"cleanup_clusters_in_cleanup{step=Signalling}":          0,
		"cleanup_clusters_in_cleanup{step=CleanupFailed}":       0,
		"cleanup_clusters_in_cleanup{step=BlastRadiusExceeded}": 0,
		"cleanup_clusters_in_cleanup{step=DeletingStage}":       0,
	}))
	g.Expect(gathered(t, m.Remaining)).To(BeEmpty())
	g.Expect(gathered(t, m.BlastRadiusHeld)).To(Equal(map[string]float64{"cleanup_blast_radius_held_teardowns{policy=prod}": 0}))
	g.Expect(m.Exports("c1")).To(BeFalse())
}

func TestPolicySeriesFollowThePolicy(t *testing.T) {
	g := NewWithT(t)
	m := metrics.NewMetrics()
	p := &v1alpha1.CleanupPolicy{}
	p.Name = "prod"
	p.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.InvalidCELExpressionReason},
		{Type: v1alpha1.StalledCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.InvalidCELExpressionReason},
	}
	p.Status.Contested, p.Status.Conflicts, p.Status.WriteFailed, p.Status.GovernedClusters, p.Status.ClustersHeld = 2, 3, 5, 4, 1
	m.ObservePolicy(p)
	g.Expect(gathered(t, m.PolicyCondition)).To(Equal(map[string]float64{
		"cleanup_policy_condition{policy=prod,reason=InvalidCELExpression,type=Ready}":   0,
		"cleanup_policy_condition{policy=prod,reason=InvalidCELExpression,type=Stalled}": 1,
		"cleanup_policy_condition{policy=prod,reason=,type=Reconciling}":                 0,
	}))
	objects := gathered(t, m.PolicyObjects)
	g.Expect(objects).To(HaveLen(8))
	g.Expect(objects).To(HaveKeyWithValue("cleanup_policy_objects{field=contested,policy=prod}", 2.0))
	g.Expect(objects).To(HaveKeyWithValue("cleanup_policy_objects{field=writeFailed,policy=prod}", 5.0))
	g.Expect(objects).To(HaveKeyWithValue("cleanup_policy_objects{field=conflicts,policy=prod}", 3.0))
	clusters := gathered(t, m.PolicyClusters)
	g.Expect(clusters).To(HaveLen(4))
	g.Expect(clusters).To(HaveKeyWithValue("cleanup_policy_clusters{field=governedClusters,policy=prod}", 4.0))
	g.Expect(clusters).To(HaveKeyWithValue("cleanup_policy_clusters{field=clustersHeld,policy=prod}", 1.0))

	// Fixed: the series of the old reasons go.
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason}}
	p.Status.Contested = 0
	m.ObservePolicy(p)
	g.Expect(gathered(t, m.PolicyCondition)).To(Equal(map[string]float64{
		"cleanup_policy_condition{policy=prod,reason=Succeeded,type=Ready}": 1,
		"cleanup_policy_condition{policy=prod,reason=,type=Stalled}":        0,
		"cleanup_policy_condition{policy=prod,reason=,type=Reconciling}":    0,
	}))
	g.Expect(gathered(t, m.PolicyObjects)).To(HaveKeyWithValue("cleanup_policy_objects{field=contested,policy=prod}", 0.0))

	other := p.DeepCopy()
	other.Name = "staging"
	m.ObservePolicy(other)
	m.ForgetPolicy("prod")
	for k := range gathered(t, m.PolicyCondition, m.PolicyClusters, m.PolicyObjects) {
		g.Expect(k).NotTo(ContainSubstring("policy=prod"))
		g.Expect(k).To(ContainSubstring("policy=staging"))
	}

	// A reconciler without metrics exports nothing, and does not fail.
	var none *metrics.Metrics
	none.ObservePolicy(p)
	none.ForgetPolicy("prod")
}
