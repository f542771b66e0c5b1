package teardown

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"
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

// Events are the cluster events the teardown reconciles: a cluster being
// deleted that carries the operator's finalizer; one whose finalizer was
// just removed (by hand: its teardown's state is dropped); one just
// deleted or found deleting at start without it (its namespace's mark is
// taken off); one gone.
func (a *ClusterTeardown) Events() predicate.Predicate {
	tornDown := func(o client.Object) bool {
		return o.GetDeletionTimestamp() != nil && controllerutil.ContainsFinalizer(o, v1alpha1.ClusterCleanupFinalizer)
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return e.Object.GetDeletionTimestamp() != nil },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return tornDown(e.ObjectNew) || tornDown(e.ObjectOld) || e.ObjectNew.GetDeletionTimestamp() != nil && e.ObjectOld.GetDeletionTimestamp() == nil
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(e event.GenericEvent) bool { return tornDown(e.Object) },
	}
}

// Watches adds the teardown's other watches: the works and namespaces of the clusters
// being torn down, the policies, whose change can change a teardown, the
// CRDs, whose installation can end a hold on a resource not served, and
// the other clusters of a held teardown's policy. Add-ons and the other
// stage and monitored resources are watched at run time (watches.go).
func (a *ClusterTeardown) Watches(b *builder.Builder) *builder.Builder {
	return b.
		Watches(&workv1.ManifestWork{}, a.worksHandler()).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(a.deletingClusterNamed)).
		Watches(snapshot.NewCleanupPolicy(), handler.EnqueueRequestsFromMapFunc(a.deletingClusters),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(watch.CrdMetadata(), handler.EnqueueRequestsFromMapFunc(a.deletingClusters)).
		Watches(snapshot.NewManagedCluster(), a.wakeHeld())
}

// deletingClusterNamed maps a namespace to the cluster of its name, if
// that cluster is being deleted.
func (a *ClusterTeardown) deletingClusterNamed(ctx context.Context, o client.Object) []reconcile.Request {
	mc := snapshot.NewManagedCluster()
	if a.Client.Get(ctx, client.ObjectKey{Name: o.GetName()}, mc) != nil || mc.GetDeletionTimestamp() == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
}

// deletingClusters maps an event that can end a hold (a CRD installed,
// changed or removed) to every cluster being torn down.
func (a *ClusterTeardown) deletingClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	list := snapshot.NewManagedClusterList()
	if err := a.Client.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "listing ManagedClusters")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		mc := &list.Items[i]
		if mc.GetDeletionTimestamp() != nil && controllerutil.ContainsFinalizer(mc, v1alpha1.ClusterCleanupFinalizer) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: mc.GetName()}})
		}
	}
	return reqs
}

// deletingClusterOf maps an object in a cluster namespace to the cluster,
// if that cluster is being deleted.
func (a *ClusterTeardown) deletingClusterOf(ctx context.Context, o client.Object) []reconcile.Request {
	// The teardowns that wait for objects here, outside their own
	// namespace (a stage's namespaces, or cluster-scoped objects).
	reqs := a.Teardowns.waitingIn(o.GetNamespace())
	mc := snapshot.NewManagedCluster()
	// Read, not kept: no copy of the cache.
	if o.GetNamespace() == "" || a.Client.Get(ctx, client.ObjectKey{Name: o.GetNamespace()}, mc, client.UnsafeDisableDeepCopy) != nil ||
		mc.GetDeletionTimestamp() == nil {
		return reqs
	}
	return append(watch.NamespaceToCluster(ctx, o), reqs...)
}

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
