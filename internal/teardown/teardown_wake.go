package teardown

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// A teardown its policy's blast radius holds (BlastRadiusExceeded) or
// keeps waiting its turn (WaitingForTurn) is decided by the other
// teardowns of its policy: a deletion that starts counts against the
// budget, a teardown that begins or is held changes the turns, and one
// that ends frees a turn. None brings an event of the held cluster itself,
// so the events of the others wake it: when a cluster of the policy starts
// being deleted, when its teardown begins, is held or ends (what the budget
// reads of it, decision.Turn, changes; not at each of its steps, which in
// a paced storm woke every waiting teardown each time), when the
// operator's finalizer goes and when it is gone; and when any
// cluster, deleting or not, gains or loses the finalizer or the
// governing-policy annotation, which changes how many clusters the policy
// governs, the base of a share (the held teardowns of the policy it left
// and of the one it joined). What no event tells (a counted teardown
// leaving the window, a release from a clock ahead coming to count) is a
// time, and the plan requeues at it.

// wakeHeld is the handler of ManagedCluster events that wakes the held
// teardowns of the same policy.
func (a *ClusterTeardown) wakeHeld() handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return
			}
			began := e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
			turned := e.ObjectNew.GetDeletionTimestamp() != nil && turnOf(e.ObjectOld) != turnOf(e.ObjectNew)
			// The finalizer or the pin changing, deleting or not, changes
			// the clusters a policy governs: the base of a share, and the
			// end of a teardown.
			regoverned := controllerutil.ContainsFinalizer(e.ObjectOld, v1alpha1.ClusterCleanupFinalizer) !=
				controllerutil.ContainsFinalizer(e.ObjectNew, v1alpha1.ClusterCleanupFinalizer)
			repinned := decision.PinOf(e.ObjectOld) != decision.PinOf(e.ObjectNew)
			if began || turned || regoverned || repinned {
				a.enqueueHeld(ctx, e.ObjectOld, q)
			}
			if repinned {
				a.enqueueHeld(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.Object != nil {
				a.enqueueHeld(ctx, e.Object, q)
			}
		},
	}
}

// enqueueHeld enqueues the teardowns of the policy that governs (or
// governed) the cluster that have not begun, other than the cluster's own:
// the held ones, and those whose first report is not written yet, which
// may have planned on what the event changed. They are kept in memory
// (teardowns.notBegun), so an event costs nothing where none waits: a
// fleet being governed sends one per cluster.
func (a *ClusterTeardown) enqueueHeld(_ context.Context, mc client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	policy := decision.PinOf(mc)
	if policy == "" {
		return
	}
	for _, req := range a.Teardowns.notBegunOf(policy, mc.GetName()) {
		q.Add(req)
	}
}

// turnOf is what the blast radius reads of a deleted cluster to decide the
// turns of the others (decision.TurnOf); the zero Turn for another object.
func turnOf(o client.Object) decision.Turn {
	mc, ok := o.(*unstructured.Unstructured)
	if !ok {
		return decision.Turn{}
	}
	return decision.TurnOf(mc)
}
