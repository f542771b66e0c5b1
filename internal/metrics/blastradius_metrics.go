package metrics

import "github.com/prometheus/client_golang/prometheus"

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
