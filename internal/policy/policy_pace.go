package policy

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// maxFleetPace bounds how long a cluster's event waits for its policies'
// fleet pass: the status of a policy lags its fleet by at most this.
const maxFleetPace = 5 * time.Second

// fleetPaceFactor is how many times its last pass a policy's next fleet pass
// waits for: the passes take at most a fifth of a core.
const fleetPaceFactor = 4

// fleetPace spaces the fleet passes that ManagedCluster events start. A
// policy's pass reads every cluster, and governing a fleet sends an event
// per cluster (the finalizer, the governing-policy annotation): run back
// to back, the passes would take a core for as long as the events last,
// each re-counting what one cluster changed. After a pass that took d,
// a cluster's event starts the next no sooner than fleetPaceFactor x d
// later (at most maxFleetPace), and the events meanwhile wait for that one
// pass: at most a fifth of a core, however large the fleet (at twice d,
// the passes took a seventh of the manager's CPU while it governed 10,000
// clusters). The policy's own changes, and the other sources, are not
// paced. It is safe for concurrent use.
type fleetPace struct {
	mu    sync.Mutex
	took  map[string]time.Duration // by policy, its last fleet pass
	wrote map[string]time.Time     // by policy, its last status write
}

// passed keeps how long the policy's last fleet pass took.
func (p *fleetPace) passed(policy string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.took == nil {
		p.took = map[string]time.Duration{}
	}
	p.took[policy] = d
}

// forget drops a deleted policy's pace.
func (p *fleetPace) forget(policy string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.took, policy)
	delete(p.wrote, policy)
}

// statusWritten keeps when the policy's status was last written.
func (p *fleetPace) statusWritten(policy string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wrote == nil {
		p.wrote = map[string]time.Time{}
	}
	p.wrote[policy] = at
}

// countsWait is how long a write of the policy's counts alone waits: the
// rest of maxFleetPace since its last status write. A fleet's teardowns
// change the counts as each cluster begins and ends; written at most once
// per maxFleetPace, a storm of them costs a few writes, not one or two a
// cluster, and the status lags the fleet by no more than it did.
func (p *fleetPace) countsWait(policy string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.wrote[policy]
	if !ok {
		return 0
	}
	return max(maxFleetPace-now.Sub(last), 0)
}

// storedAlike says whether two statuses are stored alike: the API server
// keeps the conditions' times to the second, so a status that differs from
// the one read only below the second is the same once written, and is not
// written.
func storedAlike(a, b *v1alpha1.CleanupPolicyStatus) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, s := range []*v1alpha1.CleanupPolicyStatus{a, b} {
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = s.Conditions[i].LastTransitionTime.Rfc3339Copy()
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}

// countsOnly says whether two statuses differ at most in the counts of
// clusters and stamped objects, and the message of a Ready condition that
// keeps its status and reason (it counts them too): another condition's
// message, a guard's restore say, is written at once.
func countsOnly(a, b *v1alpha1.CleanupPolicyStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, s := range []*v1alpha1.CleanupPolicyStatus{a, b} {
		s.MatchedClusters, s.GovernedClusters, s.ClustersDeleting, s.WorksStamped, s.PoliciesStamped = 0, 0, 0, 0, 0
		for i := range s.Conditions {
			if s.Conditions[i].Type == v1alpha1.ReadyCondition {
				s.Conditions[i].Message, s.Conditions[i].LastTransitionTime = "", metav1.Time{}
			}
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}

// after is how long a cluster's event waits before the policy's next pass.
func (p *fleetPace) after(policy string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return min(fleetPaceFactor*p.took[policy], maxFleetPace)
}

// pacedPolicies enqueues every policy on a ManagedCluster's event, each
// after its pace: an earlier enqueue of the policy still waiting keeps its
// time, so the events of a burst share one pass.
func (r *CleanupPolicyReconciler) pacedPolicies() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(ctx context.Context, q queue) {
		for _, req := range r.allPolicies(ctx, nil) {
			q.AddAfter(req, r.pace.after(req.Name))
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc:  func(ctx context.Context, _ event.TypedCreateEvent[client.Object], q queue) { enqueue(ctx, q) },
		UpdateFunc:  func(ctx context.Context, _ event.TypedUpdateEvent[client.Object], q queue) { enqueue(ctx, q) },
		DeleteFunc:  func(ctx context.Context, _ event.TypedDeleteEvent[client.Object], q queue) { enqueue(ctx, q) },
		GenericFunc: func(ctx context.Context, _ event.TypedGenericEvent[client.Object], q queue) { enqueue(ctx, q) },
	}
}
