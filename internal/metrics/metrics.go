package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Metrics are the cluster cleanup and policy metrics.
type Metrics struct {
	// InCleanup counts the clusters in cleanup by the reason of their step.
	InCleanup *prometheus.GaugeVec
	// Duration observes how long a cleanup took, from the deletion to the
	// finalizer's removal, by outcome.
	Duration *prometheus.HistogramVec
	// DeletedObjects counts the objects deleted, by resource.
	DeletedObjects *prometheus.CounterVec
	// ForcedObjects counts the objects whose work-agent finalizer was removed, by resource.
	ForcedObjects *prometheus.CounterVec
	// OrphanedWorks counts the ManifestWorks given deleteOption Orphan.
	OrphanedWorks prometheus.Counter
	// UnconfirmedOrphans counts the ManifestWorks deleted with an orphaning
	// deleteOption the work agent never confirmed.
	UnconfirmedOrphans prometheus.Counter
	// Remaining is, per cluster in cleanup, the objects its current step
	// still deletes or waits for: current at every reconcile, where the
	// ContentDeleteSuccess message is written at most once per progress
	// interval.
	Remaining *prometheus.GaugeVec

	// ClusterDeletion is, per cluster in cleanup, its deletionTimestamp,
	// with the policy and strategy that govern the cleanup.
	ClusterDeletion *prometheus.GaugeVec
	// ClusterTimeout is, per cluster in cleanup, the timeout of the
	// policy that governs the cleanup.
	ClusterTimeout *prometheus.GaugeVec
	// ClusterStep is 1 per cluster in cleanup, labelled with the reason of
	// its current step.
	ClusterStep *prometheus.GaugeVec

	// PolicyCondition is, per CleanupPolicy, 1 for each of its conditions
	// that is True and 0 for one that is False or absent, with its reason.
	PolicyCondition *prometheus.GaugeVec
	// PolicyClusters mirrors the cluster counts of a CleanupPolicy's status.
	PolicyClusters *prometheus.GaugeVec
	// PolicyObjects mirrors the object counts of a CleanupPolicy's status.
	PolicyObjects *prometheus.GaugeVec
	// Stamped counts the decisions the operator wrote on objects.
	Stamped *prometheus.CounterVec
	// WatchedResources is 1 for each resource whose objects the operator
	// watches and caches for its teardowns.
	WatchedResources *prometheus.GaugeVec

	// BlastRadiusHeld is the number of teardowns a policy's blast radius
	// holds (BlastRadiusExceeded) as this process last reported them;
	// BlastRadiusHolds counts the teardowns it began to hold.
	BlastRadiusHeld  *prometheus.GaugeVec
	BlastRadiusHolds *prometheus.CounterVec

	mu sync.Mutex
	// policies are the condition reasons exported per policy and type.
	policies map[string]map[string]string
}

// ClusterSeries are the labels a cluster in cleanup is exported with.
type ClusterSeries struct {
	step, policy, strategy string
	// timeout is the governing policy's timeout; 0 when none is known.
	timeout time.Duration
}

// NewMetrics returns the metrics, not registered.
func NewMetrics() *Metrics {
	m := &Metrics{policies: map[string]map[string]string{}}
	m.newCleanupTotals()
	m.newClusterSeries()
	m.newPolicySeries()
	m.newBlastRadiusSeries()
	m.Stamped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cleanup_stamped_objects_total",
		Help: "Decisions written on objects: deleteOption on ManifestWorks, pruneObjectBehavior on ConfigurationPolicies, by value (Released when given up).",
	}, []string{"kind", "value"})
	// The series of the default stages' resources exist from the start, at
	// 0: a counter series born with its first increment has no earlier
	// sample, and increase() and rate() would miss that increment.
	for _, r := range []string{decision.ManagedClusterAddOns.Resource, decision.ManifestWorks.Resource} {
		m.DeletedObjects.WithLabelValues(r)
	}
	m.ForcedObjects.WithLabelValues(decision.ManifestWorks.Resource)
	return m
}

// newCleanupTotals makes the metrics summed over the fleet's cleanups: how
// many are under way, how long they took, and what they deleted, forced
// and orphaned.
func (m *Metrics) newCleanupTotals() {
	m.InCleanup = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_clusters_in_cleanup",
		Help: "ManagedClusters whose content is being removed, by the reason of their current step.",
	}, []string{"step"})
	m.Duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cleanup_cluster_duration_seconds",
		Help:    "Time from a ManagedCluster's deletion to the removal of the operator's finalizer, by outcome.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	}, []string{"outcome"})
	m.DeletedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cleanup_deleted_objects_total",
		Help: "Objects in cluster namespaces deleted by the operator, by resource.",
	}, []string{"resource"})
	m.ForcedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cleanup_forced_objects_total",
		Help: "Objects whose work-agent finalizer the operator removed, by resource.",
	}, []string{"resource"})
	m.OrphanedWorks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cleanup_orphaned_works_total",
		Help: "ManifestWorks the operator gave deleteOption Orphan.",
	})
	m.UnconfirmedOrphans = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cleanup_unconfirmed_orphans_total",
		Help: "ManifestWorks deleted with an orphaning deleteOption the work agent never confirmed (an unavailable cluster past the timeout).",
	})
}

// newClusterSeries makes the series kept per cluster in cleanup, dropped
// when its cleanup ends: where it stands, since when, and under which
// policy and timeout, so an alert can name the cluster.
func (m *Metrics) newClusterSeries() {
	m.Remaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_cluster_remaining_objects",
		Help: "Objects the current step of a ManagedCluster's cleanup still deletes or waits for, by cluster and step.",
	}, []string{"cluster", "step"})
	m.ClusterDeletion = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_cluster_deletion_timestamp_seconds",
		Help: "The deletionTimestamp of each ManagedCluster whose cleanup is under way, in seconds since the epoch, with the policy and strategy that govern it (empty while held without one).",
	}, []string{"cluster", "policy", "strategy"})
	m.ClusterTimeout = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_cluster_timeout_seconds",
		Help: "The removeStrategy timeout of the policy governing each ManagedCluster whose cleanup is under way (absent while held without a policy).",
	}, []string{"cluster", "policy", "strategy"})
	m.ClusterStep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_cluster_step",
		Help: "1 for each ManagedCluster whose cleanup is under way, labelled with the reason of its current step.",
	}, []string{"cluster", "step"})
}

// newBlastRadiusSeries makes the metrics of the teardowns blast radiuses
// hold.
func (m *Metrics) newBlastRadiusSeries() {
	m.BlastRadiusHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_blast_radius_held_teardowns",
		Help: "Teardowns held before their first write by the blast radius of their CleanupPolicy (reason BlastRadiusExceeded), by policy.",
	}, []string{"policy"})
	m.BlastRadiusHolds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cleanup_blast_radius_holds_total",
		Help: "Teardowns the blast radius of their CleanupPolicy began to hold, by policy.",
	}, []string{"policy"})
}

// newPolicySeries makes the series kept per CleanupPolicy, mirroring its
// status, and the resources its teardowns watch.
func (m *Metrics) newPolicySeries() {
	m.PolicyCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_policy_condition",
		Help: "Per CleanupPolicy and condition type (Ready, Stalled, Reconciling): 1 while True, 0 while False or absent, with the condition's reason.",
	}, []string{"policy", "type", "reason"})
	m.PolicyClusters = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_policy_clusters",
		Help: "The cluster counts of each CleanupPolicy's status, by field: matchedClusters, governedClusters, clustersDeleting, clustersHeld.",
	}, []string{"policy", "field"})
	m.PolicyObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_policy_objects",
		Help: "The object counts of each CleanupPolicy's status, by field: worksStamped, policiesStamped, conflicts, contested, templatesNotReadingDecisions, dryRunPending, notOwned.",
	}, []string{"policy", "field"})
	m.WatchedResources = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_watched_resources",
		Help: "1 for each resource the operator watches and caches, in every namespace, for the teardowns of the policies that name it (stages, monitored resources); ManifestWorks whole, the others metadata only.",
	}, []string{"resource"})
}

// Collectors lists the metrics for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.InCleanup, m.Duration, m.DeletedObjects, m.ForcedObjects, m.OrphanedWorks, m.UnconfirmedOrphans, m.Remaining, m.Stamped,
		m.ClusterDeletion, m.ClusterTimeout, m.ClusterStep, m.PolicyCondition, m.PolicyClusters, m.PolicyObjects, m.WatchedResources,
		m.BlastRadiusHeld, m.BlastRadiusHolds}
}

// Step exports the step a cluster's cleanup reports, under the plan that
// decided it (nil when none could be made), in place of the series old
// (nil: none), and returns the series now exported. The teardown's state
// keeps them.
func (m *Metrics) Step(mc *unstructured.Unstructured, old *ClusterSeries, plan *decision.Plan, step string) *ClusterSeries {
	now := &ClusterSeries{step: step}
	switch {
	case plan == nil && old != nil:
		// Nothing could be read to plan with (a report of a failed
		// read): the cleanup stays under what governed it last.
		now.policy, now.strategy, now.timeout = old.policy, old.strategy, old.timeout
	case plan == nil:
	case plan.Policy != "" && plan.Strategy != "":
		now.policy, now.strategy = plan.Policy, string(plan.Strategy)
		if d, err := time.ParseDuration(plan.Timeout); err == nil && d > 0 {
			now.timeout = d
		}
	case plan.Policy != "":
		now.policy = plan.Policy
	}
	if m == nil {
		return now
	}
	cluster := mc.GetName()
	if old != nil {
		if old.step != now.step {
			m.InCleanup.WithLabelValues(old.step).Dec()
			m.ClusterStep.DeleteLabelValues(cluster, old.step)
		}
		if old.policy != now.policy || old.strategy != now.strategy {
			m.ClusterDeletion.DeleteLabelValues(cluster, old.policy, old.strategy)
			m.ClusterTimeout.DeleteLabelValues(cluster, old.policy, old.strategy)
		}
	}
	if old == nil || old.step != now.step {
		m.InCleanup.WithLabelValues(now.step).Inc()
	}
	m.ClusterStep.WithLabelValues(cluster, now.step).Set(1)
	if ts := mc.GetDeletionTimestamp(); ts != nil {
		m.ClusterDeletion.WithLabelValues(cluster, now.policy, now.strategy).Set(float64(ts.Unix()))
	}
	if now.timeout > 0 {
		m.ClusterTimeout.WithLabelValues(cluster, now.policy, now.strategy).Set(now.timeout.Seconds())
	} else {
		m.ClusterTimeout.DeleteLabelValues(cluster, now.policy, now.strategy)
	}
	return now
}

// SetRemaining exports the objects a cluster's current step still acts on,
// in place of the series of the step old ("": none).
func (m *Metrics) SetRemaining(cluster, old, step string, n int) {
	if m == nil {
		return
	}
	if old != "" && old != step {
		m.Remaining.DeleteLabelValues(cluster, old)
	}
	m.Remaining.WithLabelValues(cluster, step).Set(float64(n))
}

// Budget counts a teardown held by the blast radius of policy ("": not
// held), where it was counted held by old ("": not held).
func (m *Metrics) Budget(old, policy string) {
	if m == nil || old == policy {
		return
	}
	if old != "" {
		m.BlastRadiusHeld.WithLabelValues(old).Dec()
	}
	if policy != "" {
		m.BlastRadiusHeld.WithLabelValues(policy).Inc()
		m.BlastRadiusHolds.WithLabelValues(policy).Inc()
	}
}

// Drop removes the series of a cluster that left cleanup: its step's
// (nil: none), its remaining count's (the step, "": none) and its blast
// radius hold (the policy, "": none).
func (m *Metrics) Drop(cluster string, series *ClusterSeries, remaining, budget string) {
	if m == nil {
		return
	}
	if series != nil {
		m.InCleanup.WithLabelValues(series.step).Dec()
		m.ClusterStep.DeleteLabelValues(cluster, series.step)
		m.ClusterDeletion.DeleteLabelValues(cluster, series.policy, series.strategy)
		m.ClusterTimeout.DeleteLabelValues(cluster, series.policy, series.strategy)
	}
	if remaining != "" {
		m.Remaining.DeleteLabelValues(cluster, remaining)
	}
	m.Budget(budget, "")
}

// CountStamped counts a decision written on an object of kind.
func (m *Metrics) CountStamped(kind, value string) {
	if m != nil {
		m.Stamped.WithLabelValues(kind, value).Inc()
	}
}

// Done observes how long a cleanup took, by outcome.
func (m *Metrics) Done(outcome string, d time.Duration) {
	if m != nil {
		m.Duration.WithLabelValues(outcome).Observe(d.Seconds())
	}
}

// Exports says whether a series labelled with the cluster is exported.
func (m *Metrics) Exports(cluster string) bool {
	if m == nil {
		return false
	}
	for _, c := range []prometheus.Collector{m.ClusterStep, m.ClusterDeletion, m.ClusterTimeout, m.Remaining} {
		ch := make(chan prometheus.Metric)
		go func() { c.Collect(ch); close(ch) }()
		found := false
		for metric := range ch {
			var d dto.Metric
			if metric.Write(&d) != nil {
				continue
			}
			for _, l := range d.GetLabel() {
				found = found || l.GetName() == "cluster" && l.GetValue() == cluster
			}
		}
		if found {
			return true
		}
	}
	return false
}

// policyConditionTypes are the condition types exported per policy: Ready
// is always present once reconciled, the others only while True.
var policyConditionTypes = []string{v1alpha1.ReadyCondition, v1alpha1.StalledCondition, v1alpha1.ReconcilingCondition}

// ObservePolicy exports a CleanupPolicy's conditions and counts as its
// reconcile left them.
func (m *Metrics) ObservePolicy(p *v1alpha1.CleanupPolicy) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	reasons := m.policies[p.Name]
	if reasons == nil {
		reasons = map[string]string{}
		m.policies[p.Name] = reasons
	}
	for _, typ := range policyConditionTypes {
		value, reason := 0.0, ""
		if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
			reason = c.Reason
			if c.Status == metav1.ConditionTrue {
				value = 1
			}
		}
		if old, ok := reasons[typ]; ok && old != reason {
			m.PolicyCondition.DeleteLabelValues(p.Name, typ, old)
		}
		reasons[typ] = reason
		m.PolicyCondition.WithLabelValues(p.Name, typ, reason).Set(value)
	}
	s := &p.Status
	for field, v := range map[string]int32{
		"matchedClusters":  s.MatchedClusters,
		"governedClusters": s.GovernedClusters,
		"clustersDeleting": s.ClustersDeleting,
		"clustersHeld":     s.ClustersHeld,
	} {
		m.PolicyClusters.WithLabelValues(p.Name, field).Set(float64(v))
	}
	for field, v := range map[string]int32{
		"worksStamped":                 s.WorksStamped,
		"policiesStamped":              s.PoliciesStamped,
		"conflicts":                    s.Conflicts,
		"contested":                    s.Contested,
		"writeFailed":                  s.WriteFailed,
		"templatesNotReadingDecisions": s.TemplatesNotReadingDecisions,
		"dryRunPending":                s.DryRunPending,
		"notOwned":                     s.NotOwned,
	} {
		m.PolicyObjects.WithLabelValues(p.Name, field).Set(float64(v))
	}
}

// ForgetPolicy drops the series of a CleanupPolicy that is gone.
func (m *Metrics) ForgetPolicy(name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.policies, name)
	labels := prometheus.Labels{"policy": name}
	m.PolicyCondition.DeletePartialMatch(labels)
	m.PolicyClusters.DeletePartialMatch(labels)
	m.PolicyObjects.DeletePartialMatch(labels)
}
