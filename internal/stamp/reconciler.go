package stamp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// Adapter is what the generic reconciler needs to know of one kind of
// target: how to make one, which cluster decides for it, what to do, and
// what else to watch.
type Adapter[T client.Object] interface {
	// Name names the controller.
	Name() string
	// New returns an empty object of the kind.
	New() T
	// ClusterName is the ManagedCluster whose governing policy decides for obj.
	ClusterName(obj T) string
	// Reconcile applies the governing policy's decisions to obj.
	Reconcile(ctx context.Context, obj T, g *decision.Governed) (reconcile.Result, error)
	// Watches adds the adapter's other watches to the controller.
	Watches(b *builder.Builder) *builder.Builder
}

// StandaloneAdapter is an Adapter whose objects may live in a namespace
// that names no ManagedCluster: they are governed by the standalone rule
// (decision.Resolve).
type StandaloneAdapter interface {
	Standalone() bool
}

// ForgetAdapter is an Adapter that has nothing to do for an object being
// deleted, or gone, but forget what it keeps of it: it forgets the object
// on the event that marks it deleting and on its delete event, which then
// cost no reconcile.
type ForgetAdapter interface {
	Forget(obj client.Object)
}

// NamespaceAdapter is an Adapter whose objects are reconciled a cluster
// namespace at a time, the namespace being their cluster: a request names
// the namespace only, the cluster's governing policy is resolved once for
// all its objects, and each is then reconciled in turn. A fleet's start
// queues one request per cluster, not one per object (200,000 works on
// 10,000 clusters).
type NamespaceAdapter[T client.Object] interface {
	// List lists the objects of one namespace, to be decided under g.
	List(ctx context.Context, namespace string, g *decision.Governed) ([]T, error)
}

// NamespaceRequest is the request of a NamespaceAdapter's namespace.
func NamespaceRequest(namespace string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace}}
}

// FilterAdapter is an Adapter reconciled only for the events of its own
// kind its predicate passes; events mapped from other kinds are not
// filtered.
type FilterAdapter interface {
	Events() predicate.Predicate
}

// Reconciler is the one reconciler of every target kind: it fetches the
// object, finds the policy that governs its cluster, and hands both to the
// kind's adapter.
type Reconciler[T client.Object] struct {
	client.Client
	Reader  *snapshot.Reader
	Adapter Adapter[T]
	// MaxConcurrentReconciles is how many objects are reconciled at once;
	// 0 means one.
	MaxConcurrentReconciles int
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if n, ok := r.Adapter.(NamespaceAdapter[T]); ok {
		return r.reconcileNamespace(ctx, n, req.Namespace)
	}
	obj := r.Adapter.New()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	g, err := r.govern(ctx, r.Adapter.ClusterName(obj))
	if err != nil || r.suspended(ctx, g, obj) {
		return reconcile.Result{}, err
	}
	return r.Adapter.Reconcile(ctx, obj, g)
}

// reconcileNamespace reconciles every object of a namespace under its
// cluster's governing policy, resolved once. Before each object it checks
// that the cluster and the policy did not change since
// (snapshot.Check.Current), and resolves again when they did, or when
// the last object spent the CEL budget (a variable computed then may hold
// the exhaustion): the batch goes on under the new resolution when it
// decides as the old one did what List read (resolvedAlike), and stops
// otherwise, the namespace queued to be listed and decided afresh. Each
// object is decided within a CEL budget of its own. An object's error,
// named, does not stop the others; the namespace is retried when any
// failed.
func (r *Reconciler[T]) reconcileNamespace(ctx context.Context, n NamespaceAdapter[T], namespace string) (reconcile.Result, error) {
	g, err := r.govern(ctx, namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	objs, err := n.List(ctx, namespace, g)
	if err != nil || r.suspended(ctx, g, objs...) {
		return reconcile.Result{}, err
	}
	var (
		result reconcile.Result
		errs   []error
		check  = r.Reader.Check()
	)
	for i, obj := range objs {
		current, err := check.Current(ctx, namespace, g)
		if err == nil && (!current || g.Budget.Remaining() <= 0) {
			var again *decision.Governed
			if again, err = r.govern(ctx, namespace); err == nil && r.suspended(ctx, again, objs[i:]...) {
				break
			}
			if err == nil {
				if !resolvedAlike(g, again) {
					logf.FromContext(ctx).V(1).Info("the cluster or its policy changed; its objects decided again", "kind", r.Adapter.Name(),
						"namespace", namespace, "left", len(objs)-i)
					result.RequeueAfter = time.Millisecond
					break
				}
				g = again
			}
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		g.Budget.Refill(cel.ReconcileCostBudget)
		res, err := r.Adapter.Reconcile(ctx, obj, g)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", r.Adapter.Name(), client.ObjectKeyFromObject(obj), err))
		}
		if res.RequeueAfter > 0 && (result.RequeueAfter == 0 || res.RequeueAfter < result.RequeueAfter) {
			result.RequeueAfter = res.RequeueAfter
		}
	}
	return result, errors.Join(errs...)
}

// resolvedAlike says whether again, a resolution made during a batch, leaves
// what the batch listed under g as it is: the same policy at the same
// generation, held alike, the cluster's deletion marked alike. A change of
// the cluster's status or labels alone is alike: the objects left are
// decided under again, which binds the cluster as it is now.
func resolvedAlike(g, again *decision.Governed) bool {
	samePolicy := (g.Policy == nil) == (again.Policy == nil) &&
		(g.Policy == nil || g.Policy.UID == again.Policy.UID && g.Policy.Generation == again.Policy.Generation)
	deleting := func(x *decision.Governed) bool { return x.Cluster != nil && x.Cluster.GetDeletionTimestamp() != nil }
	return samePolicy && (g.Held == nil) == (again.Held == nil) && deleting(g) == deleting(again)
}

// govern resolves the policy that governs the named cluster.
func (r *Reconciler[T]) govern(ctx context.Context, cluster string) (*decision.Governed, error) {
	s, ok := r.Adapter.(StandaloneAdapter)
	return r.Reader.Govern(ctx, cluster, ok && s.Standalone())
}

// suspended says whether g's policy is suspended or its cluster paused: no
// write at all for objs then. Resuming changes the policy's generation or
// the cluster's annotations, whose events bring them back.
func (r *Reconciler[T]) suspended(ctx context.Context, g *decision.Governed, objs ...T) bool {
	if g.Suspended == "" {
		return false
	}
	logf.FromContext(ctx).V(1).Info("suspended, nothing written", "kind", r.Adapter.Name(), "objects", len(objs), "reason", g.Suspended)
	return true
}

// ownEvents filters the events of the adapter's own kind. A delete event
// reconciles nothing: the reconcile would read nothing and do nothing, and
// a cluster's teardown deletes its works by the hundred. A ForgetAdapter
// forgets the object there instead (tombstones of a missed delete
// included), and on an update of an object being deleted, which costs no
// reconcile either; an update to another object of the same name (a
// deletion and re-creation the watch missed) forgets the old one.
func ownEvents[T client.Object](adapter Adapter[T]) predicate.Predicate {
	forget, _ := adapter.(ForgetAdapter)
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			switch {
			case forget == nil || e.ObjectOld == nil || e.ObjectNew == nil:
				return true
			case e.ObjectOld.GetUID() != e.ObjectNew.GetUID():
				// Deleted and re-created, seen as an update: the old one
				// is gone, the new one is reconciled.
				forget.Forget(e.ObjectOld)
				return true
			case e.ObjectNew.GetDeletionTimestamp() != nil:
				forget.Forget(e.ObjectNew)
				return false
			}
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			if forget != nil && e.Object != nil {
				forget.Forget(e.Object)
			}
			return false
		},
	}
}

// namespaceOf maps an object to its namespace's request.
func namespaceOf(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{NamespaceRequest(obj.GetNamespace())}
}

// SetupWithManager registers the controller, For the adapter's kind.
func (r *Reconciler[T]) SetupWithManager(mgr manager.Manager) error {
	preds := []predicate.Predicate{ownEvents(r.Adapter)}
	if f, ok := r.Adapter.(FilterAdapter); ok {
		preds = append(preds, f.Events())
	}
	b := builder.ControllerManagedBy(mgr).Named(r.Adapter.Name()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)})
	if _, ok := r.Adapter.(NamespaceAdapter[T]); ok {
		b = b.Watches(r.Adapter.New(), handler.EnqueueRequestsFromMapFunc(namespaceOf), builder.WithPredicates(preds...))
	} else {
		b = b.For(r.Adapter.New(), builder.WithPredicates(preds...))
	}
	_, err := r.Adapter.Watches(b).Build(r)
	return err
}
