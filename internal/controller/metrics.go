package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stampedObjects counts the decisions the operator wrote on objects.
var stampedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "cleanup_stamped_objects_total",
	Help: "Decisions written on objects: deleteOption on ManifestWorks, pruneObjectBehavior on ConfigurationPolicies, by value (Released when given up).",
}, []string{"kind", "value"})

// Metrics are the cluster cleanup metrics.
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

	mu    sync.Mutex
	steps map[string]string
	// remaining is the step of each cluster's Remaining series.
	remaining map[string]string
}

// NewMetrics returns the metrics, not registered.
func NewMetrics() *Metrics {
	return &Metrics{
		InCleanup: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cleanup_clusters_in_cleanup",
			Help: "ManagedClusters whose content is being removed, by the reason of their current step.",
		}, []string{"step"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cleanup_cluster_duration_seconds",
			Help:    "Time from a ManagedCluster's deletion to the removal of the operator's finalizer, by outcome.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}, []string{"outcome"}),
		DeletedObjects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cleanup_deleted_objects_total",
			Help: "Objects in cluster namespaces deleted by the operator, by resource.",
		}, []string{"resource"}),
		ForcedObjects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cleanup_forced_objects_total",
			Help: "Objects whose work-agent finalizer the operator removed, by resource.",
		}, []string{"resource"}),
		OrphanedWorks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cleanup_orphaned_works_total",
			Help: "ManifestWorks the operator gave deleteOption Orphan.",
		}),
		UnconfirmedOrphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cleanup_unconfirmed_orphans_total",
			Help: "ManifestWorks deleted with an orphaning deleteOption the work agent never confirmed (an unavailable cluster past the timeout).",
		}),
		Remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cleanup_cluster_remaining_objects",
			Help: "Objects the current step of a ManagedCluster's cleanup still deletes or waits for, by cluster and step.",
		}, []string{"cluster", "step"}),
		steps:     map[string]string{},
		remaining: map[string]string{},
	}
}

// Collectors lists the metrics for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.InCleanup, m.Duration, m.DeletedObjects, m.ForcedObjects, m.OrphanedWorks, m.UnconfirmedOrphans, m.Remaining, stampedObjects}
}

func (m *Metrics) observeStep(cluster, step string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.steps[cluster] == step {
		return
	}
	if old, ok := m.steps[cluster]; ok {
		m.InCleanup.WithLabelValues(old).Dec()
	}
	m.steps[cluster] = step
	m.InCleanup.WithLabelValues(step).Inc()
}

// observeRemaining sets the objects a cluster's current step still acts on.
func (m *Metrics) observeRemaining(cluster, step string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.remaining[cluster]; ok && old != step {
		m.Remaining.DeleteLabelValues(cluster, old)
	}
	m.remaining[cluster] = step
	m.Remaining.WithLabelValues(cluster, step).Set(float64(n))
}

func (m *Metrics) observeDone(cluster, outcome string, d time.Duration) {
	m.forget(cluster)
	m.Duration.WithLabelValues(outcome).Observe(d.Seconds())
}

// forget drops a cluster from the clusters in cleanup: at its outcome, or
// when it leaves cleanup without one (released when no policy governs it).
func (m *Metrics) forget(cluster string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.steps[cluster]; ok {
		m.InCleanup.WithLabelValues(old).Dec()
		delete(m.steps, cluster)
	}
	if old, ok := m.remaining[cluster]; ok {
		m.Remaining.DeleteLabelValues(cluster, old)
		delete(m.remaining, cluster)
	}
}
