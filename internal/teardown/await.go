package teardown

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// A stage that deleted a group of works waits for them to be gone: the work
// agent removes its finalizer from each, one after another, and each work's
// removal is an event. Planning the whole teardown again at each of them
// (reading the snapshot, ordering every object) changes nothing until the
// last one is gone, and would be most of a teardown's cost. So a reconcile
// whose next step only waits for works being deleted remembers them, and
// the removal of one of them while others remain does not queue the cluster
// at once: the metric of what remains follows it, and the cluster is queued
// for the end of the progress interval, when the condition may say the new
// count. The removal of the last one, any update of a work (its labels,
// finalizers or the agent's Deleting condition may change the plan or its
// message), any other event of the namespace, the cluster or the policy,
// and the step's own requeues (progress, timeouts) still plan at once.
//
// The works seen removed are kept for the teardown's life, so that a plan
// read before a removal, and remembered after it, does not wait for an
// event already past.

// awaited is what the step of the last reconcile only waits for: works of
// the cluster namespace being deleted, by UID; step names it for the
// metric.
type awaited struct {
	uids sets.Set[types.UID]
	step string
	// others counts the step's other objects (its later groups), which
	// the metric counts too.
	others int
	// progress is the teardown's last progress write, as the reconcile
	// that made the set left it.
	progress *progressMark
}

// await remembers what the plan's next step only waits for, if that is
// all it does: works being deleted in the cluster namespace, nothing to
// write. Anything else forgets it.
func (st *teardownState) await(plan *decision.Plan) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.awaited = awaited{}
	if plan == nil {
		return
	}
	uids, ok := onlyAwaits(plan)
	if !ok {
		return
	}
	// What the metric counts of the step, but these.
	others := stepObjects(plan.Next()).Difference(uids).Len()
	uids = uids.Difference(st.seenGone)
	if uids.Len() > 0 {
		st.awaited = awaited{uids: uids, step: stepKey(plan.Next()), others: others, progress: st.progress}
	}
}

// onlyAwaits returns the works the plan's next step waits for, when it is
// a stage whose current group only waits for works being deleted in the
// cluster namespace.
func onlyAwaits(plan *decision.Plan) (sets.Set[types.UID], bool) {
	step := plan.Next()
	if step == nil || step.Kind != decision.StepStage || plan.DryRun || plan.Held != "" || plan.Suspended != "" ||
		len(plan.Now()) > 0 || len(step.Actions) == 0 {
		return nil, false
	}
	uids := sets.New[types.UID]()
	group := step.Actions[0].Group
	for _, act := range step.Actions {
		if act.Group != group {
			break
		}
		if act.Verb != decision.VerbWait || act.Resource != decision.ResourceName(decision.ManifestWorks) ||
			act.Namespace != plan.Cluster || act.Meta == nil || act.Meta.DeletionTimestamp == nil {
			return nil, false
		}
		uids.Insert(act.UID)
	}
	return uids, true
}

// gone notes a work of the cluster namespace removed, and says whether the
// cluster need not be queued at once for it: other awaited works remain.
// It also returns the step, what the metric counts of it now, and the last
// progress write.
func (st *teardownState) gone(uid types.UID) (quiet bool, step string, remaining int, last *progressMark) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.seenGone == nil {
		st.seenGone = sets.New[types.UID]()
	}
	st.seenGone.Insert(uid)
	w := &st.awaited
	if !w.uids.Has(uid) {
		return false, "", 0, nil
	}
	w.uids.Delete(uid)
	return w.uids.Len() > 0, w.step, w.others + w.uids.Len(), w.progress
}

// stateIn is the state of the teardown of the cluster of a namespace, if
// this process runs one.
func (t *Teardowns) stateIn(namespace string) *teardownState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.named[namespace]
}

// worksHandler queues the deleting cluster of a work's namespace for the
// work's events (deletingClusterOf), but for the removal of a work its
// step only waits for while others of them remain.
func (a *ClusterTeardown) worksHandler() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(ctx context.Context, o client.Object, q queue) {
		for _, r := range a.deletingClusterOf(ctx, o) {
			q.Add(r)
		}
	}
	// others queues the teardowns that wait for objects in the namespace
	// from outside it, not the namespace's own cluster.
	others := func(o client.Object, q queue) {
		for _, r := range a.Teardowns.waitingIn(o.GetNamespace()) {
			if r.Name != o.GetNamespace() {
				q.Add(r)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) { add(ctx, e.ObjectNew, q) },
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			ns := e.Object.GetNamespace()
			if st := a.Teardowns.stateIn(ns); st != nil {
				// Held back until the progress may be written; at once
				// when it may already.
				quiet, step, remaining, last := st.gone(e.Object.GetUID())
				if wait := a.progress.wait(last); quiet && wait > 0 {
					st.observeRemaining(step, remaining)
					others(e.Object, q)
					q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}}, wait)
					return
				}
			}
			add(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { add(ctx, e.Object, q) },
	}
}
