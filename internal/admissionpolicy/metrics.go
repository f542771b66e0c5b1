package admissionpolicy

import "github.com/prometheus/client_golang/prometheus"

// The guard's metrics; the operator registers them with its own.
var (
	// Restores counts the objects the guard put back, by kind, name and
	// change (deleted, changed).
	Restores = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cleanup_guard_restores_total",
		Help: "Admission and flow-control objects of the operator put back after they were deleted or changed, by kind, name and change.",
	}, []string{"kind", "name", "change"})
	// Unrestorable is 1 while the operator may not create or watch its
	// admission and flow-control objects (the bootstrap role was dropped).
	Unrestorable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cleanup_guard_unrestorable",
		Help: "1 while the operator lacks the rights to restore its admission and flow-control objects (the bootstrap ClusterRole was dropped); 0 otherwise.",
	})
)
