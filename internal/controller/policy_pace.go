package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// maxFleetPace bounds how long a cluster's event waits for its policies'
// fleet pass: the status of a policy lags its fleet by at most this.
const maxFleetPace = 5 * time.Second

// fleetPace spaces the fleet passes that ManagedCluster events start. A
// policy's pass reads every cluster, and governing a fleet sends an event
// per cluster (the finalizer, the governing-policy annotation): run back
// to back, the passes would take a core for as long as the events last,
// each re-counting what one cluster changed. After a pass that took d,
// a cluster's event starts the next no sooner than 2d later (at most
// maxFleetPace), and the events meanwhile wait for that one pass: at most
// a third of a core, however large the fleet. The policy's own changes,
// and the other sources, are not paced. It is safe for concurrent use.
type fleetPace struct {
	mu   sync.Mutex
	took map[string]time.Duration // by policy, its last fleet pass
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
}

// after is how long a cluster's event waits before the policy's next pass.
func (p *fleetPace) after(policy string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return min(2*p.took[policy], maxFleetPace)
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
