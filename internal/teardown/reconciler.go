package teardown

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"
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

// clusterPatch is the one writer of a ManagedCluster in its teardown, made
// once per reconcile from the cluster as read. The teardown changes the
// cluster in memory (its annotations, the ContentDeleteSuccess condition)
// and flushes the changes where the order of writes matters, each flush
// named after what must be on the cluster before what follows it:
//
//	flushUnconfirmed      the works' unconfirmed orphans, before they are deleted
//	flushForcing          the objects about to be forced, before any finalizer goes
//	flushReport           the step's condition, at the end of the step
//	flushBeforeFinalizer  the outcome, before the record ends and the finalizer goes
//	removeFinalizer       the operator's finalizer, last
//
// Every write is on the cluster as last read or written: the metadata and
// the status go in merge patches carrying the resourceVersion, as the
// teardown reads, changes and writes back values another writer may have
// changed (the annotations' lists and counts; the conditions list, which a
// merge patch replaces whole), so a change another writer made since (OCM's registration controllers write
// the cluster's labels, annotations and status) is a conflict, never
// overwritten. A conflict returns an error and nothing after the flush is
// written; the other writer's event brings the cluster back.
type clusterPatch struct {
	client client.Client
	// mc is the cluster as the teardown changed it: what it reads.
	mc *unstructured.Unstructured
	// base is the cluster as read, or as the last write returned it.
	base *unstructured.Unstructured
	// written: a write of this helper returned base.
	written bool
}

// flushed is what a flush wrote.
type flushed struct {
	metadata, status bool
	// checked: nothing had changed, and an empty patch on the
	// resourceVersion confirmed the cluster is as base has it.
	checked bool
}

// check says when a flush with nothing to write still confirms that the
// cluster is as the teardown read it: before a write that acts on what it
// read (the cluster unavailable, not paused), a cluster changed since is a
// conflict, as a write with something to write would be.
type check int

const (
	// noCheck: nothing changed, nothing is sent.
	noCheck check = iota
	// checkAlways: an empty patch on the resourceVersion whenever
	// nothing changed.
	checkAlways
	// checkIfUnwritten: an empty patch only while this helper has written
	// nothing, so base is still the cluster as read (from a cache that may
	// lag behind the teardown's own last write).
	checkIfUnwritten
)

func newClusterPatch(c client.Client, mc *unstructured.Unstructured) *clusterPatch {
	return &clusterPatch{client: c, mc: mc, base: mc.DeepCopy()}
}

// annotate sets an annotation, in memory.
func (p *clusterPatch) annotate(key, value string) { SetAnnotation(p.mc, key, value) }

// setCondition sets ContentDeleteSuccess, the one condition the operator
// owns on the cluster, in memory, and says whether it changed. The other
// controllers' conditions are kept as read.
func (p *clusterPatch) setCondition(status metav1.ConditionStatus, reason, message string) bool {
	return setContentDeleteCondition(p.mc, status, reason, message)
}

// flushUnconfirmed writes the unconfirmed orphans recorded, before the
// works they name are deleted: the outcome reports them after a restart.
func (p *clusterPatch) flushUnconfirmed(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "recording the unconfirmed orphans", checkAlways)
}

// flushForcing writes the count of forced objects and the batch about to
// be forced, before any finalizer is removed: a teardown that forced
// anything never ends as Completed, whenever the operator stops. A batch
// recorded already (a force retried, or cut by a restart) is still
// checked: a force decided on a cluster read unavailable or not paused
// must not go once it is available or paused again.
func (p *clusterPatch) flushForcing(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "recording the forced objects", checkAlways)
}

// flushReport writes the step's condition, at the end of the step.
func (p *clusterPatch) flushReport(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "reporting the step", noCheck)
}

// flushBeforeFinalizer writes the outcome, before the record ends and the
// finalizer goes: a cluster gone says how its teardown ended. An outcome
// the cluster, as read, carries already is checked: the cache may not
// show a report written over it since (a record that failed to end).
func (p *clusterPatch) flushBeforeFinalizer(ctx context.Context) (flushed, error) {
	return p.flush(ctx, "writing the outcome", checkIfUnwritten)
}

// flush writes what changed in memory since the cluster was read or last
// written: the metadata (labels, annotations) first, then the status, each
// in a merge patch on the resourceVersion; with nothing changed, it checks
// the cluster as c says. why names the flush in errors.
func (p *clusterPatch) flush(ctx context.Context, why string, c check) (flushed, error) {
	var done flushed
	if p.metadataSame() && p.statusSame() && (c == checkAlways || c == checkIfUnwritten && !p.written) {
		after := p.base.DeepCopy()
		if err := p.client.Patch(ctx, after, client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})); err != nil {
			return done, fmt.Errorf("%s of %s: %w", why, p.mc.GetName(), err)
		}
		p.wrote(after, false, false)
		done.checked = true
		return done, nil
	}
	if !p.metadataSame() {
		after := p.base.DeepCopy()
		after.SetLabels(p.mc.GetLabels())
		after.SetAnnotations(p.mc.GetAnnotations())
		if err := p.client.Patch(ctx, after, client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})); err != nil {
			return done, fmt.Errorf("%s of %s: %w", why, p.mc.GetName(), err)
		}
		p.wrote(after, false, !p.statusSame())
		done.metadata = true
	}
	if !p.statusSame() {
		after := p.base.DeepCopy()
		setStatus(after, p.mc.Object["status"])
		if err := p.client.Status().Patch(ctx, after, client.MergeFromWithOptions(p.base, client.MergeFromWithOptimisticLock{})); err != nil {
			return done, fmt.Errorf("%s of %s: %w", why, p.mc.GetName(), err)
		}
		p.wrote(after, !p.metadataSame(), false)
		done.status = true
	}
	return done, nil
}

// removeFinalizer removes the finalizer, and the annotations named, from
// the cluster: the teardown's last write, after anything still in memory
// is flushed. It says whether it removed it: not when the cluster, as
// read, no longer carries it.
//
// A JSON patch, not a merge patch: the finalizers are a list, which a
// merge patch replaces whole. Without the resourceVersion it would drop a
// finalizer another controller added since the read; with it, any other
// write since (OCM's controllers write the cluster's status) would refuse
// the teardown's last write. The JSON patch tests exactly what the removal
// relies on, the cluster's UID and the finalizer at its index, and removes
// the annotations only where they are: a finalizer moved, or an annotation
// gone, is refused (Invalid), never written over; so is, when only is
// true, a finalizer added since the read.
func (p *clusterPatch) removeFinalizer(ctx context.Context, finalizer string, annotations []string, only bool) (bool, error) {
	if _, err := p.flush(ctx, "removing the finalizer", noCheck); err != nil {
		return false, err
	}
	patch, ok := removeFinalizerPatch(p.base, finalizer, annotations, only)
	if !ok {
		return false, nil
	}
	after := p.base.DeepCopy()
	if err := p.client.Patch(ctx, after, patch); err != nil {
		return false, err
	}
	p.wrote(after, false, false)
	return true, nil
}

// metadataSame says whether the labels and annotations are as last written.
func (p *clusterPatch) metadataSame() bool {
	return maps.Equal(p.base.GetLabels(), p.mc.GetLabels()) && maps.Equal(p.base.GetAnnotations(), p.mc.GetAnnotations())
}

// statusSame says whether the status is as last written.
func (p *clusterPatch) statusSame() bool {
	return equality.Semantic.DeepEqual(p.base.Object["status"], p.mc.Object["status"])
}

// wrote takes the cluster a write returned as the new base, and as the
// cluster the teardown reads, keeping the metadata or the status changed
// in memory that the write did not carry.
func (p *clusterPatch) wrote(server *unstructured.Unstructured, keepMetadata, keepStatus bool) {
	next := server.DeepCopy()
	if keepMetadata {
		next.SetLabels(p.mc.GetLabels())
		next.SetAnnotations(p.mc.GetAnnotations())
	}
	if keepStatus {
		setStatus(next, p.mc.Object["status"])
	}
	p.base, p.written = server, true
	p.mc.Object = next.Object
}

// setStatus sets the object's status to a copy of status; nil removes it.
func setStatus(obj *unstructured.Unstructured, status any) {
	if status == nil {
		delete(obj.Object, "status")
		return
	}
	obj.Object["status"] = runtime.DeepCopyJSONValue(status)
}

// setContentDeleteCondition sets ContentDeleteSuccess on the cluster and
// reports whether it changed. Other controllers' conditions are kept as they are.
func setContentDeleteCondition(mc *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) bool {
	conds := decision.ClusterConditions(mc)
	changed := meta.SetStatusCondition(&conds, metav1.Condition{
		Type:    v1alpha1.ContentDeleteSuccessCondition,
		Status:  status,
		Reason:  reason,
		Message: v1alpha1.ConditionMessage(message),
	})
	if !changed {
		return false
	}
	raw := make([]any, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return false
		}
		raw[i] = m
	}
	_ = unstructured.SetNestedSlice(mc.Object, raw, "status", "conditions")
	return true
}

// ClusterAnnotations are the annotations the operator puts on a
// ManagedCluster; a released cluster keeps none of them.
var ClusterAnnotations = decision.ClusterAnnotations

// UnlabelNamespace removes the cluster-deleting label from the namespace
// of a cluster not being deleted. Admission refuses new ManifestWorks and
// add-ons in a labelled namespace, so a label left behind would refuse
// every work of a cluster re-imported under the same name, the operator's
// signal work included.
//
// The label may instead be a teardown's that began after the cluster was
// read: a fresh read of the cluster, after the namespace's, says so, and
// the label stays. The namespace (nil: none) is unlabelled only as it was
// read (its UID and resourceVersion): a namespace changed meanwhile is left
// to its event, which brings the cluster back. It says whether it wrote.
func (a *ClusterWriter) UnlabelNamespace(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	if ns == nil || ns.DeletionTimestamp != nil {
		return false, nil
	}
	if _, labelled := ns.Labels[v1alpha1.ClusterDeletingLabel]; !labelled {
		return false, nil
	}
	if deleting, err := a.DeletingNow(ctx, ns.Name); err != nil || deleting {
		return false, err // a teardown's label
	}
	return a.setDeletingLabel(ctx, ns.Name, ns.UID, ns.ResourceVersion, false)
}

// ClusterNamespace reads the namespace of the cluster name from the cache;
// nil when there is none.
func (a *ClusterWriter) ClusterNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := a.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns, nil
}

// DeletingNow says whether the cluster is being deleted, read from the API
// server rather than the cache: governance, which acts on a cluster it read
// not being deleted, asks before it undoes what a teardown begun since may
// rely on.
func (a *ClusterWriter) DeletingNow(ctx context.Context, name string) (bool, error) {
	reader := a.APIReader
	if reader == nil {
		reader = a.Client
	}
	mc := snapshot.NewManagedCluster()
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return mc.GetDeletionTimestamp() != nil, nil
}

// setDeletingLabel puts the cluster-deleting label on a namespace, or takes
// it off, on exactly the namespace of that UID and, when rv is set, only as
// it was read, and says whether it did: a namespace changed meanwhile (or a
// cache behind the last write) is refused, not written, and left to its
// event.
func (a *ClusterWriter) setDeletingLabel(ctx context.Context, name string, uid types.UID, rv string, on bool) (written bool, err error) {
	var value any
	verb := "unlabelled"
	if on {
		value, verb = "true", "labelled"
	}
	return a.patchNamespace(ctx, name, uid, rv, namespaceMarks{labels: map[string]any{v1alpha1.ClusterDeletingLabel: value}}, verb)
}

// namespaceMarks are labels and annotations to write on a namespace; a nil
// value removes one.
type namespaceMarks struct {
	labels, annotations map[string]any
}

// patchNamespace writes marks on the namespace of that UID and, when rv is
// set, only as it was read, and says whether it did, as setDeletingLabel.
func (a *ClusterWriter) patchNamespace(ctx context.Context, name string, uid types.UID, rv string, m namespaceMarks, verb string) (written bool, err error) {
	md := map[string]any{"uid": uid, "labels": m.labels}
	if rv != "" {
		md["resourceVersion"] = rv
	}
	if len(m.annotations) > 0 {
		md["annotations"] = m.annotations
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return false, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := a.Client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			logf.FromContext(ctx).Info("cluster namespace changed since it was read; not "+verb+" yet", "namespace", name)
			return false, nil
		}
		return false, client.IgnoreNotFound(err)
	}
	logf.FromContext(ctx).Info("cluster namespace "+verb, "namespace", name, "labels", slices.Sorted(maps.Keys(m.labels)))
	return true, nil
}

func HasClusterAnnotations(mc *unstructured.Unstructured) bool {
	for _, key := range ClusterAnnotations {
		if _, ok := mc.GetAnnotations()[key]; ok {
			return true
		}
	}
	return false
}

// ClusterWriter is what the governance of clusters and their teardown
// both write with.
type ClusterWriter struct {
	Client   client.Client
	Recorder events.EventRecorder
	Metrics  *metrics.Metrics
	// Tally counts, per policy, the objects the operator leaves alone
	// because it did not create them.
	Tally *tally.Tally
	// apiReader reads a work, managedFields included, when orphaning it
	// conflicts, and a signal work the cache may not show applied yet.
	APIReader client.Reader
}

func SetAnnotation(o metav1.Object, key, value string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	o.SetAnnotations(a)
}

func RemoveAnnotation(o metav1.Object, key string) {
	a := o.GetAnnotations()
	delete(a, key)
	o.SetAnnotations(a)
}

// The mark of a governed cluster's namespace (v1alpha1.GovernedNamespaceLabel
// and the policy's name) holds OCM's own cleanup at admission, so that the
// policy's teardown alone decides when and in which order the cluster's
// add-ons and works go. Governance writes it while a policy governs the
// cluster, before any deletion; the teardown keeps it and takes it off at
// its end, with the cluster-deleting label.

// markOf is the mark a namespace should carry for policy: none for "".
func markOf(policy string) namespaceMarks {
	if policy == "" {
		return namespaceMarks{labels: map[string]any{v1alpha1.GovernedNamespaceLabel: nil},
			annotations: map[string]any{v1alpha1.GoverningPolicyAnnotation: nil}}
	}
	return namespaceMarks{labels: map[string]any{v1alpha1.GovernedNamespaceLabel: "true"},
		annotations: map[string]any{v1alpha1.GoverningPolicyAnnotation: policy}}
}

// HeldBy is the policy whose mark a cluster it governs carries: none in
// dry run.
func HeldBy(p *cel.Policy) string {
	if p.Spec.DryRun {
		return ""
	}
	return p.Name
}

// MarkNamespace gives the namespace (nil: none) of a cluster not being
// deleted the mark of policy, or takes it off for "" (no policy governs
// the cluster, or its policy is in dry run, which changes nothing OCM
// does), and says whether the namespace carries what it should: a
// namespace changed meanwhile is not written, and its event brings the
// cluster back. A namespace not there yet is marked on its creation's
// event. The mark is taken off only after a fresh read says the cluster is
// still not being deleted: a teardown begun since relies on it.
func (a *ClusterWriter) MarkNamespace(ctx context.Context, ns *corev1.Namespace, policy string) (bool, error) {
	switch {
	case ns == nil || ns.DeletionTimestamp != nil:
		return true, nil
	case policy != "":
		if decision.Marked(ns) == policy {
			return true, nil
		}
	case !decision.HasMark(ns):
		return true, nil
	default:
		if deleting, err := a.DeletingNow(ctx, ns.Name); err != nil || deleting {
			return true, err
		}
	}
	return a.writeMark(ctx, ns, policy)
}

// writeMark writes the mark of policy on the namespace as it was read, and
// says whether it did.
func (a *ClusterWriter) writeMark(ctx context.Context, ns *corev1.Namespace, policy string) (bool, error) {
	verb := "marked governed by " + policy
	if policy == "" {
		verb = "unmarked"
	}
	return a.patchNamespace(ctx, ns.Name, ns.UID, ns.ResourceVersion, markOf(policy), verb)
}

// unmark takes the mark off the namespace of a cluster being deleted that
// no teardown of the operator's holds (it lost or never had the finalizer):
// OCM cleans it, as it would without the operator.
func (a *ClusterTeardown) unmark(ctx context.Context, name string) error {
	ns, err := a.ClusterNamespace(ctx, name)
	if err != nil || ns == nil || ns.DeletionTimestamp != nil || !decision.HasMark(ns) {
		return err
	}
	_, err = a.writeMark(ctx, ns, "")
	return err
}

// keepMark marks the namespace of a cluster whose teardown its policy runs
// (not in dry run, not held, not suspended) when it is not marked yet: the
// cluster was deleted before governance marked it.
func (a *ClusterTeardown) keepMark(ctx context.Context, s *decision.Snapshot, plan *decision.Plan) error {
	ns := s.Namespace
	if plan.Policy == "" || plan.DryRun || plan.Held != "" || plan.Suspended != "" ||
		ns == nil || ns.Name != plan.Cluster || ns.DeletionTimestamp != nil || decision.Marked(ns) == plan.Policy {
		return nil
	}
	if next := plan.Next(); next == nil || next.Kind == decision.StepFinish {
		return nil
	}
	_, err := a.writeMark(ctx, ns, plan.Policy)
	return err
}
