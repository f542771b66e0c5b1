package governance

import (
	"context"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/stamp"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/teardown"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters/status,verbs=get;patch
// +kubebuilder:rbac:groups=work.open-cluster-management.io,resources=manifestworks,verbs=get;list;watch;create;patch;delete;deletecollection
// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=managedclusteraddons,verbs=get;list;watch;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get

// ManagedClusterAdapter keeps governed ManagedClusters under the operator's
// finalizer with their deletion-signal work, and their deletion protection.
// A cluster being deleted is its teardown's (ClusterTeardown).
type ManagedClusterAdapter struct {
	teardown.ClusterWriter
	// ConfirmationMaxAge is how long a deletion confirmation counts; 0
	// accepts none.
	ConfirmationMaxAge time.Duration
	// SignalLimits bound the deletion-signal manifests; zero: the defaults.
	SignalLimits admissionpolicy.SignalLimits

	// watches are the teardown's: a cluster governed has the resources
	// its teardown will list watched from then on.
	watches *watch.ResourceWatches
	// Teardowns are the teardown's states; governance keeps there the
	// stamps of the signal works it retires.
	Teardowns *teardown.Teardowns
}

var _ stamp.Adapter[*unstructured.Unstructured] = &ManagedClusterAdapter{}

// NewManagedClusterAdapter returns the adapter of the clusters not being
// deleted; it shares the teardown's writer, watches and states.
func NewManagedClusterAdapter(t *teardown.ClusterTeardown, confirmationMaxAge time.Duration, limits admissionpolicy.SignalLimits) *ManagedClusterAdapter {
	return &ManagedClusterAdapter{ClusterWriter: t.ClusterWriter, watches: t.Resources, Teardowns: t.Teardowns,
		ConfirmationMaxAge: confirmationMaxAge, SignalLimits: limits}
}

// Name implements Adapter.
func (a *ManagedClusterAdapter) Name() string { return "managedcluster" }

// New implements Adapter.
func (a *ManagedClusterAdapter) New() *unstructured.Unstructured { return snapshot.NewManagedCluster() }

// ClusterName implements Adapter.
func (a *ManagedClusterAdapter) ClusterName(mc *unstructured.Unstructured) string {
	return mc.GetName()
}

// Events implements FilterAdapter: clusters not being deleted.
func (a *ManagedClusterAdapter) Events() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetDeletionTimestamp() == nil })
}

// Reconcile implements Adapter.
func (a *ManagedClusterAdapter) Reconcile(ctx context.Context, mc *unstructured.Unstructured, g *decision.Governed) (reconcile.Result, error) {
	if mc.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil // its teardown's
	}
	res, wrote, err := a.reconcileProtection(ctx, mc, g)
	if err != nil || wrote {
		// The write's event brings the cluster back.
		return res, err
	}
	return res, a.reconcileGovernance(ctx, mc, g)
}

// reconcileGovernance keeps the mark of the cluster's namespace, the
// finalizer, the governing-policy annotation and the deletion-signal work
// in step with the policy that governs the cluster, and releases a cluster
// no policy governs any more.
func (a *ManagedClusterAdapter) reconcileGovernance(ctx context.Context, mc *unstructured.Unstructured, g *decision.Governed) error {
	log := logf.FromContext(ctx)
	if g.Held != nil {
		log.Info("cluster held: no governance decision", "cluster", mc.GetName(), "reason", g.Held.Error())
		return nil
	}
	// A cluster that is not being deleted has no teardown: a label left on
	// its namespace (by a teardown that ended without its unlabel, its
	// finalizer removed by hand, the cluster recreated under its name)
	// would make admission refuse its works.
	ns, err := a.ClusterNamespace(ctx, mc.GetName())
	if err != nil {
		return err
	}
	if wrote, err := a.UnlabelNamespace(ctx, ns); err != nil || wrote {
		return err // the namespace's event brings the cluster back
	}
	if g.Policy == nil {
		if done, err := a.MarkNamespace(ctx, ns, ""); err != nil || !done {
			return err
		}
		return a.releaseCluster(ctx, mc)
	}

	p := g.Policy
	// Before the finalizer: a cluster deleted from then on finds OCM's
	// cleanup held already. Not written yet: the namespace's event brings
	// the cluster back.
	if done, err := a.MarkNamespace(ctx, ns, teardown.HeldBy(p)); err != nil || !done {
		return err
	}
	if !controllerutil.ContainsFinalizer(mc, v1alpha1.ClusterCleanupFinalizer) || decision.Pin(mc) != p.Name {
		before := mc.DeepCopy()
		controllerutil.AddFinalizer(mc, v1alpha1.ClusterCleanupFinalizer)
		teardown.SetAnnotation(mc, v1alpha1.GoverningPolicyAnnotation, p.Name)
		if err := a.Client.Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
		a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.GovernedReason, "Govern", "governed by CleanupPolicy %s", p.Name)
		log.Info("cluster governed", "cluster", mc.GetName(), "policy", p.Name)
	}
	// Its teardown will list these: watched from now, a deletion starts
	// from a synced cache.
	a.watches.Prepare(ctx, decision.ReadResources(p))
	if p.Spec.DryRun {
		return nil
	}
	name := decision.SignalWorkName(p)
	if err := a.RetireSignalWorks(ctx, mc.GetName(), name); err != nil {
		return err
	}
	if name == "" {
		tally.ClearNotOwnedWorks(a.Tally, mc.GetName())
		return nil
	}
	return a.applySignalWork(ctx, mc, name, p)
}

// releaseCluster lets go of a cluster no policy governs any more: its
// signal works are retired, then the finalizer and the operator's
// annotations are removed, so deleting the cluster no longer waits for
// the operator.
func (a *ManagedClusterAdapter) releaseCluster(ctx context.Context, mc *unstructured.Unstructured) error {
	tally.ClearNotOwnedWorks(a.Tally, mc.GetName())
	// Signal works outlive the finalizer until the agent has applied
	// their Orphan; their events bring the cluster back.
	if err := a.RetireSignalWorks(ctx, mc.GetName(), ""); err != nil {
		return err
	}
	if !controllerutil.ContainsFinalizer(mc, v1alpha1.ClusterCleanupFinalizer) && !teardown.HasClusterAnnotations(mc) {
		return nil
	}
	before := mc.DeepCopy()
	controllerutil.RemoveFinalizer(mc, v1alpha1.ClusterCleanupFinalizer)
	for _, key := range teardown.ClusterAnnotations {
		teardown.RemoveAnnotation(mc, key)
	}
	if err := a.Client.Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.ReleasedReason, "Govern", "no CleanupPolicy governs the cluster any more")
	logf.FromContext(ctx).Info("cluster released", "cluster", mc.GetName())
	return nil
}

// Watches implements Adapter: the signal works, the cluster namespaces
// (a signal work waits for its namespace), and the policies, which can
// change every cluster's governor.
func (a *ManagedClusterAdapter) Watches(b *builder.Builder) *builder.Builder {
	return b.
		Watches(&workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(signalWorkToCluster),
			builder.WithPredicates(signalWorkEvents)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
		})).
		Watches(snapshot.NewCleanupPolicy(), handler.EnqueueRequestsFromMapFunc(a.allClusters),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
}

// signalWorkEvents are the events of works that carry the signal label,
// or carried it before an update: a signal work that lost it is applied
// again.
var signalWorkEvents = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return isSignalLabelled(e.Object) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return isSignalLabelled(e.Object) },
	GenericFunc: func(e event.GenericEvent) bool { return isSignalLabelled(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return isSignalLabelled(e.ObjectOld) || isSignalLabelled(e.ObjectNew)
	},
}

func isSignalLabelled(o client.Object) bool { return o.GetLabels()[v1alpha1.SignalWorkLabel] == "true" }

// signalWorkToCluster maps a signal work's events to its cluster. The
// label is wider than decision.IsSignalWork on purpose: a work of the
// signal's name that the operator does not own is reported, and its events
// bring the cluster back.
func signalWorkToCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return watch.NamespaceToCluster(ctx, o)
}

func (a *ManagedClusterAdapter) allClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	list := snapshot.NewManagedClusterList()
	// Names only: no copy of the cache.
	if err := a.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		logf.FromContext(ctx).Error(err, "listing ManagedClusters")
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].GetName()}}
	}
	return reqs
}
