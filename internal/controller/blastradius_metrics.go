package controller

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// blastRadiusHeld is the number of teardowns a policy's blast radius holds
// (BlastRadiusExceeded) as this process last reported them; blastRadiusHolds
// counts the teardowns it began to hold.
var (
	blastRadiusHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cleanup_blast_radius_held_teardowns",
		Help: "Teardowns held before their first write by the blast radius of their CleanupPolicy (reason BlastRadiusExceeded), by policy.",
	}, []string{"policy"})
	blastRadiusHolds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cleanup_blast_radius_holds_total",
		Help: "Teardowns the blast radius of their CleanupPolicy began to hold, by policy.",
	}, []string{"policy"})
)

// heldByBudget is the policy of each cluster whose teardown the blast
// radius holds, as reported.
var heldByBudget = struct {
	sync.Mutex
	policy map[string]string
}{policy: map[string]string{}}

// observeBlastRadius records whether the report of a cluster's teardown
// under policy is a blast-radius hold.
func observeBlastRadius(cluster, policy, reason string) {
	heldByBudget.Lock()
	defer heldByBudget.Unlock()
	old, was := heldByBudget.policy[cluster]
	held := reason == v1alpha1.BlastRadiusExceededReason && policy != ""
	if was && (!held || old != policy) {
		blastRadiusHeld.WithLabelValues(old).Dec()
		delete(heldByBudget.policy, cluster)
	}
	if held && (!was || old != policy) {
		blastRadiusHeld.WithLabelValues(policy).Inc()
		blastRadiusHolds.WithLabelValues(policy).Inc()
		heldByBudget.policy[cluster] = policy
	}
}

// blastRadiusKeeps says whether the cluster is counted as held.
func blastRadiusKeeps(cluster string) bool {
	heldByBudget.Lock()
	defer heldByBudget.Unlock()
	_, ok := heldByBudget.policy[cluster]
	return ok
}
