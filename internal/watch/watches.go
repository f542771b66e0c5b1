package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// ResourceWatches adds metadata-only watches, at run time, on the resources
// policies name as stages or monitored resources, and maps their events to
// the cluster whose namespace holds them. Only names, labels, annotations and
// finalizers are cached.
type ResourceWatches struct {
	cache cache.Cache
	// client reads the cache, and asks the API server whether the
	// operator may watch a resource (SelfSubjectAccessReviews).
	client client.Client
	mapper meta.RESTMapper
	toReq  handler.MapFunc
	// watching reports the watched resources (nil: not reported).
	watching *prometheus.GaugeVec
	// reader reads the API server directly, to learn whether the operator
	// may list a resource before it starts caching it.
	reader client.Reader

	mu      sync.RWMutex
	ctrl    controller.Controller
	watched map[schema.GroupVersionResource]schema.GroupVersionKind
	// full are the kinds another controller already caches whole: they are
	// read from that informer, not from a second, metadata-only copy.
	full map[schema.GroupVersionResource]bool
	// off are the resources whose CRD is being removed or gone.
	off map[schema.GroupVersionResource]bool
	// preparing guards prepared, apart from mu: a probe under mu never
	// holds up the governance reconciles that only look prepared up.
	preparing sync.Mutex
	// prepared are the resources prepare has tried to watch.
	prepared map[schema.GroupVersionResource]bool
}

func NewResourceWatches(c cache.Cache, cached client.Client, reader client.Reader, mapper meta.RESTMapper, toReq handler.MapFunc,
	watching *prometheus.GaugeVec) *ResourceWatches {
	if watching != nil {
		watching.Reset() // a manager started again in the same process
	}
	return &ResourceWatches{cache: c, client: cached, reader: reader, mapper: mapper, toReq: toReq, watching: watching,
		watched: map[schema.GroupVersionResource]schema.GroupVersionKind{}, full: map[schema.GroupVersionResource]bool{},
		prepared: map[schema.GroupVersionResource]bool{}}
}

// WatchedFromStart records a resource another controller watches whole
// from the start: read from that informer, never removed.
func (w *ResourceWatches) WatchedFromStart(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watched[gvr], w.full[gvr] = gvk, true
	w.report(gvr, true)
}

// report sets the watched-resources metric of a resource.
func (w *ResourceWatches) report(gvr schema.GroupVersionResource, on bool) {
	switch {
	case w.watching == nil:
	case on:
		w.watching.WithLabelValues(decision.ResourceName(gvr)).Set(1)
	default:
		w.watching.DeleteLabelValues(decision.ResourceName(gvr))
	}
}

// SetController is called once the controller is built.
func (w *ResourceWatches) SetController(c controller.Controller) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctrl = c
}

// AccessError says the operator may not list or watch a resource a policy
// names: the cleanup cannot see what it would wait for or delete.
type AccessError struct {
	gvr schema.GroupVersionResource
	err error
	// deleteIn, when set, says it is delete the operator may not do,
	// there: a namespace, or "cluster-scoped".
	deleteIn string
}

func (e *AccessError) Error() string {
	if e.deleteIn != "" {
		return fmt.Sprintf("the operator may not delete %s (%s), where a stage outside the cluster namespace deletes (grant delete on it there): %v",
			decision.ResourceName(e.gvr), e.deleteIn, e.err)
	}
	return fmt.Sprintf("the operator may not list or watch %s (grant get, list and watch on it, as config/rbac/extra_resources_role.yaml does): %v",
		decision.ResourceName(e.gvr), e.err)
}

func (e *AccessError) Unwrap() error { return e.err }

// ensure makes sure the resource is watched and returns its kind. served is
// false when the API server does not serve the resource (its CRD is not
// installed), so that no object of it can exist. A resource the operator
// may not list is not watched (its cache would never fill, and a read from
// it would wait forever): ensure returns an accessError, and tries again
// on the next call.
func (w *ResourceWatches) ensure(ctx context.Context, gvr schema.GroupVersionResource) (gvk schema.GroupVersionKind, served bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gvk, ok := w.watched[gvr]; ok {
		return gvk, true, nil
	}
	if w.off[gvr] {
		// Its CRD is being removed: still listed for a moment, but an
		// informer started now would fail once it is gone.
		return schema.GroupVersionKind{}, false, nil
	}
	gvk, err = w.mapper.KindFor(gvr)
	if meta.IsNoMatchError(err) {
		return schema.GroupVersionKind{}, false, nil
	}
	if err != nil {
		return schema.GroupVersionKind{}, false, fmt.Errorf("mapping %s: %w", gvr, err)
	}
	if w.ctrl == nil {
		return schema.GroupVersionKind{}, false, fmt.Errorf("watching %s: the controller is not built yet", gvr)
	}
	probe := &metav1.PartialObjectMetadataList{}
	probe.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := w.reader.List(ctx, probe, client.Limit(1)); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return schema.GroupVersionKind{}, false, &AccessError{gvr: gvr, err: err}
		}
		if apierrors.IsNotFound(err) {
			// The REST mapper remembers resources whose CRD was removed.
			return schema.GroupVersionKind{}, false, nil
		}
		return schema.GroupVersionKind{}, false, fmt.Errorf("listing %s: %w", gvr, err)
	}
	if err := w.mayWatch(ctx, gvr); err != nil {
		return schema.GroupVersionKind{}, false, err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := w.ctrl.Watch(source.Kind(w.cache, client.Object(obj), handler.EnqueueRequestsFromMapFunc(w.toReq))); err != nil {
		return schema.GroupVersionKind{}, false, fmt.Errorf("watching %s: %w", gvr, err)
	}
	w.watched[gvr] = gvk
	w.report(gvr, true)
	return gvk, true, nil
}

// mayWatch asks the API server whether the operator may watch the resource
// in every namespace. An informer that may list but not watch says it is
// synced after its first list, then only lists again after each refused
// watch: a cache that lags, where a gate could pass while an object
// exists. Such a resource is an accessError, as one it may not list.
func (w *ResourceWatches) mayWatch(ctx context.Context, gvr schema.GroupVersionResource) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}}}
	switch err := w.client.Create(ctx, review); {
	case apierrors.IsForbidden(err):
		// Every authenticated user may ask, unless a hub took it away.
		return &AccessError{gvr: gvr, err: fmt.Errorf("it may not ask whether it may watch it (create selfsubjectaccessreviews): %w", err)}
	case err != nil:
		return fmt.Errorf("asking whether the operator may watch %s: %w", decision.ResourceName(gvr), err)
	}
	if !review.Status.Allowed {
		reason := cmp.Or(review.Status.Reason, review.Status.EvaluationError, "not allowed")
		return &AccessError{gvr: gvr, err: fmt.Errorf("watch is not allowed: %s", reason)}
	}
	return nil
}

// MayDelete implements snapshot.DeleteChecker: it asks the API server
// whether the operator may delete the resource in the namespace ("":
// cluster-scoped), for a stage outside the cluster namespace. Asked on
// every read, so that a permission granted or taken away counts at once.
func (w *ResourceWatches) MayDelete(ctx context.Context, gvr schema.GroupVersionResource, namespace string) error {
	where := cmp.Or(namespace, "cluster-scoped")
	if namespace != "" {
		where = "in namespace " + namespace
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Namespace: namespace,
			Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}}}
	switch err := w.client.Create(ctx, review); {
	case apierrors.IsForbidden(err):
		return &AccessError{gvr: gvr, deleteIn: where,
			err: fmt.Errorf("it may not ask whether it may delete it (create selfsubjectaccessreviews): %w", err)}
	case err != nil:
		return fmt.Errorf("asking whether the operator may delete %s %s: %w", decision.ResourceName(gvr), where, err)
	}
	if !review.Status.Allowed {
		reason := cmp.Or(review.Status.Reason, review.Status.EvaluationError, "not allowed")
		return &AccessError{gvr: gvr, deleteIn: where, err: fmt.Errorf("delete is not allowed: %s", reason)}
	}
	return nil
}

// Forget stops watching a resource whose CRD is removed: its informer
// would fail to list it forever. It stays unwatched, served or not, until
// allow says its CRD is installed again.
func (w *ResourceWatches) Forget(gvr schema.GroupVersionResource) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.off == nil {
		w.off = map[schema.GroupVersionResource]bool{}
	}
	w.off[gvr] = true
	gvk, ok := w.watched[gvr]
	if !ok || w.full[gvr] {
		return
	}
	delete(w.watched, gvr)
	w.report(gvr, false)
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	_ = w.cache.RemoveInformer(context.Background(), obj)
}

// Allow lets ensure watch a resource forget stopped, once its CRD is back.
func (w *ResourceWatches) Allow(gvr schema.GroupVersionResource) {
	w.mu.Lock()
	delete(w.off, gvr)
	w.mu.Unlock()
	w.preparing.Lock()
	delete(w.prepared, gvr)
	w.preparing.Unlock()
}

// Prepare starts watching, before any cluster is deleted, the resources a
// policy's teardowns list (its stages and monitored resources), so that
// the first teardown after a start reads a synced cache rather than
// waiting for a new informer to list the hub. Each resource is tried once
// (again once its CRD comes back), each try bounded by prepareTimeout: one
// the operator may not list or watch, or that is not served, is the
// teardown's to hold and report; prepare logs it. Cluster-scoped resources
// are never watched: a teardown does not list them.
func (w *ResourceWatches) Prepare(ctx context.Context, gvrs []schema.GroupVersionResource) {
	for _, gvr := range gvrs {
		w.preparing.Lock()
		tried := w.prepared[gvr]
		w.prepared[gvr] = true
		w.preparing.Unlock()
		if tried {
			continue
		}
		scope, err := snapshot.ScopeOf(w.mapper, gvr)
		if err == nil && scope == decision.Namespaced {
			tryCtx, cancel := context.WithTimeout(ctx, prepareTimeout)
			_, _, err = w.ensure(tryCtx, gvr)
			cancel()
		}
		var accessErr *AccessError
		switch {
		case errors.As(err, &accessErr):
			logf.FromContext(ctx).Info("not watching a resource a policy names: a cleanup that needs it will be held until the operator may",
				"resource", decision.ResourceName(gvr), "error", err.Error())
		case err != nil:
			logf.FromContext(ctx).V(1).Info("not watching a resource ahead of teardowns; the first teardown tries again",
				"resource", decision.ResourceName(gvr), "error", err.Error())
		}
	}
}

// prepareTimeout bounds prepare's probes of one resource.
const prepareTimeout = 10 * time.Second

// List implements snapshot.Lister: the objects of a resource in a
// namespace, from the cache, watched from the first list. The list is read
// under the lock forget takes, so that it never recreates an informer
// forget removed.
func (w *ResourceWatches) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]metav1.PartialObjectMetadata, bool, error) {
	gvk, served, err := w.ensure(ctx, gvr)
	if err != nil || !served {
		return nil, false, err
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if _, ok := w.watched[gvr]; !ok {
		return nil, false, nil // forgotten since: no longer served
	}
	if w.full[gvr] {
		items, err := listWorksMetadata(ctx, w.client, client.InNamespace(namespace))
		return items, true, err
	}
	items, err := snapshot.ListMetadata(ctx, w.client, gvk, namespace)
	return items, true, err
}

// ListAsMetadata lists a kind from its whole-object informer and returns the
// objects' metadata.
func ListAsMetadata(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]metav1.PartialObjectMetadata, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	out := make([]metav1.PartialObjectMetadata, len(list.Items))
	for i := range list.Items {
		out[i] = asMetadata(&list.Items[i])
	}
	return out, nil
}

// listWorksMetadata lists ManifestWorks from their typed informer and
// returns their metadata.
func listWorksMetadata(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]metav1.PartialObjectMetadata, error) {
	var list workv1.ManifestWorkList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing ManifestWorks: %w", err)
	}
	out := make([]metav1.PartialObjectMetadata, len(list.Items))
	for i := range list.Items {
		out[i].SetGroupVersionKind(snapshot.ManifestWorkGVK)
		out[i].ObjectMeta = list.Items[i].ObjectMeta
	}
	return out, nil
}

// asMetadata is the metadata of a whole object.
func asMetadata(u *unstructured.Unstructured) metav1.PartialObjectMetadata {
	m := metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(u.GroupVersionKind())
	md, _ := u.Object["metadata"].(map[string]any)
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(md, &m.ObjectMeta)
	return m
}

// NamespaceToCluster maps an object in a cluster namespace to its cluster.
func NamespaceToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetNamespace()}}}
}

// CrdMetadata is a CustomResourceDefinition watched as metadata only.
func CrdMetadata() *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	return crd
}
