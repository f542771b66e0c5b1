package teardown

import (
	"context"
	"time"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ClusterTeardown runs the teardown of each ManagedCluster being deleted
// that carries the operator's finalizer. It owns what a teardown needs:
// the watches of the resources teardowns list, the state of each teardown
// in memory (teardowns), its pacing and its record.
type ClusterTeardown struct {
	ClusterWriter
	// Mapper names the resources of manifests, for orphaning decisions.
	Mapper apimeta.RESTMapper
	// NamespaceDeny are the namespaces a teardown never deletes
	// (decision.NamespaceDenyList); nil: decision.DefaultNamespaceDeny.
	NamespaceDeny []string
	// BlastRadius is the operator-wide budget, where a policy sets none.
	BlastRadius v1alpha1.BlastRadius

	Resources *watch.ResourceWatches
	// Teardowns are the states of the teardowns this process runs.
	Teardowns *Teardowns
	// progress paces the writes of a teardown's progress on the cluster.
	progress *progress
	// beforeCollection, in tests, runs between the check of a group
	// deleted in one request and the request.
	beforeCollection func()
	// maxLeftOut is decision.MaxLeftOut (0), but in tests.
	maxLeftOut int
	// admissionSettle is AdmissionSettle, but in tests.
	admissionSettle time.Duration
	// records writes the teardown records.
	records *record.Writer
	// governor resolves the policy that governs a cluster.
	governor *snapshot.Reader
}

var _ reconcile.Reconciler = &ClusterTeardown{}

// NewClusterTeardown returns the teardown of the clusters governor resolves
// the governing policy of; it adds watches at run time through the
// manager's cache and REST mapper. A step's progress is
// written at most once per progressInterval (0: DefaultProgressInterval;
// negative: on every change).
//
// The teardown records are written, and their metadata read, through
// configMaps: a client of the operator's own ConfigMaps (nil: the
// manager's client).
func NewClusterTeardown(mgr manager.Manager, governor *snapshot.Reader, recorder events.EventRecorder, metrics *metrics.Metrics,
	progressInterval time.Duration, records RecordOptions, configMaps client.Client) *ClusterTeardown {
	if progressInterval == 0 {
		progressInterval = DefaultProgressInterval
	}
	a := &ClusterTeardown{ClusterWriter: ClusterWriter{Client: mgr.GetClient(), Recorder: recorder, Metrics: metrics, APIReader: mgr.GetAPIReader()},
		Mapper: mgr.GetRESTMapper(), governor: governor, admissionSettle: AdmissionSettle, Teardowns: NewTeardowns(metrics), progress: newProgress(progressInterval)}
	records.Namespace = record.Namespace(records.Namespace)
	if configMaps == nil {
		configMaps = mgr.GetClient()
	}
	a.records = &record.Writer{Client: configMaps, Reader: mgr.GetAPIReader(), Namespace: records.Namespace, Retention: records.Retention}
	var watching *prometheus.GaugeVec
	if metrics != nil {
		watching = metrics.WatchedResources
	}
	a.Resources = watch.NewResourceWatches(mgr.GetCache(), mgr.GetClient(), mgr.GetAPIReader(), mgr.GetRESTMapper(), a.deletingClusterOf, watching)
	// Watched from the start by Watches; works whole, as the ManifestWork
	// controller caches them whole anyway.
	a.Resources.WatchedFromStart(decision.ManifestWorks, snapshot.ManifestWorkGVK)
	// Add-ons, whose CRD a hub may lack, are watched at run time like
	// any stage resource, from when a policy that deletes them governs a
	// cluster (watches.prepare).
	return a
}

// ForgetAddOns stops watching ManagedClusterAddOns: their CRD was removed.
func (a *ClusterTeardown) ForgetAddOns() { a.Resources.Forget(decision.ManagedClusterAddOns) }

// AllowAddOns lets the cleanup watch ManagedClusterAddOns again, once their CRD is installed again.
func (a *ClusterTeardown) AllowAddOns(manager.Manager) error {
	a.Resources.Allow(decision.ManagedClusterAddOns)
	return nil
}

// SetupWithManager registers the teardown's controller, "teardown", with
// workers reconciles at once (0: one), For the ManagedClusters its events
// pass; the watches of stage and monitored resources are added at run
// time.
func (a *ClusterTeardown) SetupWithManager(mgr manager.Manager, workers int) error {
	b := builder.ControllerManagedBy(mgr).Named("teardown").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		For(snapshot.NewManagedCluster(), builder.WithPredicates(a.Events()))
	c, err := a.Watches(b).Build(a)
	if err != nil {
		return err
	}
	a.Resources.SetController(c)
	return nil
}

// Reconcile implements reconcile.Reconciler: the cluster as the cache has
// it (gone: what is kept of it is dropped), the policy that governs it,
// then one step of its teardown. Nothing is written for a cluster whose
// policy is suspended or that is paused; resuming changes the policy's
// generation or the cluster's annotations, whose events bring it back.
func (a *ClusterTeardown) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	mc := snapshot.NewManagedCluster()
	if err := a.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		if apierrors.IsNotFound(err) {
			a.Teardowns.gone(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	g, err := a.governor.Govern(ctx, mc.GetName(), false)
	if err != nil {
		return reconcile.Result{}, err
	}
	if g.Suspended != "" {
		logf.FromContext(ctx).V(1).Info("suspended, nothing written", "kind", "teardown", "cluster", mc.GetName(), "reason", g.Suspended)
		a.sawSuspended(mc)
		return reconcile.Result{}, nil
	}
	return a.reconcileCluster(ctx, mc, g)
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

// reconcileCluster reconciles a cluster under the policy that governs it.
func (a *ClusterTeardown) reconcileCluster(ctx context.Context, mc *unstructured.Unstructured, g *decision.Governed) (reconcile.Result, error) {
	if mc.GetDeletionTimestamp() == nil {
		// Governance's. A teardown kept under its name is of a cluster
		// gone and recreated before its delete was seen: it has none.
		a.Teardowns.replaced(mc.GetName(), mc.GetUID())
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(mc, v1alpha1.ClusterCleanupFinalizer) {
		// Not the operator's cleanup (any more): a finalizer removed by
		// hand ends it, or the cluster was deleted before governance could
		// add it. Nor is OCM's cleanup held for it.
		a.Teardowns.end(mc.GetUID(), false)
		return reconcile.Result{}, a.unmark(ctx, mc.GetName())
	}
	return a.reconcileDeletion(ctx, mc, g)
}

// sawSuspended remembers a deleting cluster seen paused or under a
// suspended policy: its first teardown reconcile after the resume reports
// it, and its timeout counts from there.
func (a *ClusterTeardown) sawSuspended(mc *unstructured.Unstructured) {
	if mc.GetDeletionTimestamp() != nil && controllerutil.ContainsFinalizer(mc, v1alpha1.ClusterCleanupFinalizer) {
		a.Teardowns.of(mc.GetName(), mc.GetUID()).sawSuspended()
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

// RecordOptions say where teardown records are kept and for how long.
type RecordOptions struct {
	// Namespace is the operator's namespace (record.Namespace).
	Namespace string
	// Retention bounds the ended records kept.
	Retention record.Retention
}

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
