package stamp

import (
	"context"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// ManifestWorkAdapter stamps each governed ManifestWork with the
// deleteOption its policy's orphaning rules decide.
type ManifestWorkAdapter struct {
	stamper
	Mapper meta.RESTMapper
}

// NewManifestWorkAdapter returns the adapter. apiReader reads a work from
// the API server, managedFields included, when an apply conflicts.
func NewManifestWorkAdapter(c client.Client, apiReader client.Reader, mapper meta.RESTMapper, recorder events.EventRecorder, tally *tally.Tally, metrics *metrics.Metrics) *ManifestWorkAdapter {
	return &ManifestWorkAdapter{stamper: stamper{Client: c, APIReader: apiReader, Recorder: recorder, Tally: tally, Metrics: metrics}, Mapper: mapper}
}

var (
	_ Adapter[*workv1.ManifestWork]          = &ManifestWorkAdapter{}
	_ NamespaceAdapter[*workv1.ManifestWork] = &ManifestWorkAdapter{}
)

// Name implements Adapter.
func (a *ManifestWorkAdapter) Name() string { return "manifestwork" }

// Forget implements ForgetAdapter.
func (a *ManifestWorkAdapter) Forget(w client.Object) { a.forget(w, "ManifestWork") }

// New implements Adapter.
func (a *ManifestWorkAdapter) New() *workv1.ManifestWork { return &workv1.ManifestWork{} }

// ClusterName implements Adapter: a work's cluster is its namespace.
func (a *ManifestWorkAdapter) ClusterName(w *workv1.ManifestWork) string { return w.GetNamespace() }

// Reconcile implements Adapter. The signal work is the cluster
// controller's; the works of a deleting cluster are the teardown's, which
// decides their deleteOption (Orphan for all under Needless) and waits for
// the agent to apply it: a rule decision stamped now would undo it. A work
// comes from List, with the manifests the API server stores when g's
// policy reads them.
func (a *ManifestWorkAdapter) Reconcile(ctx context.Context, w *workv1.ManifestWork, g *decision.Governed) (reconcile.Result, error) {
	// An add-on's work is its add-on manager's, which re-applies it: its
	// deleteOption is not written (a teardown reports what it cannot keep).
	// The operator's own works (its signal works, by the managed-by label
	// only it may write) are governance's: an apply of deleteOption alone
	// under the operator's field manager would drop the rest of the work.
	skip := decision.ManagedByOperator(w) || decision.AddonOf(w) != "" || (g.Cluster != nil && g.Cluster.GetDeletionTimestamp() != nil)
	_, err := a.reconcileStamp(ctx, w, g, skip, "ManifestWork", "Orphaning", func() (stampDecision, error) {
		desired := decision.DeleteOption{}
		if g.Policy != nil {
			var err error
			if desired, err = a.decide(g, w); err != nil {
				return stampDecision{}, err
			}
		}
		current := desired.Equal(decision.CurrentDeleteOption(w))
		return stampDecision{current: current, pending: !current, stamp: deleteOptionStamp(desired)}, nil
	})
	return reconcile.Result{}, err
}

func (a *ManifestWorkAdapter) decide(g *decision.Governed, w *workv1.ManifestWork) (decision.DeleteOption, error) {
	return decideOrphaning(g, w, a.Mapper)
}

// decideOrphaning evaluates the governing policy's orphaning rules on a
// work's manifests (decision.WorkOrphaning), resources named by the mapper.
func decideOrphaning(g *decision.Governed, w *workv1.ManifestWork, mapper meta.RESTMapper) (decision.DeleteOption, error) {
	return decision.WorkOrphaning(g.Policy, g.Activation, w, func(gvk schema.GroupVersionKind) (string, error) {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return "", err
		}
		return mapping.Resource.Resource, nil
	})
}

// releasedDeleteOption is the deleteOption applied when the operator gives
// its decision up and the API server refuses the apply of nothing: the
// CRD's default.
func releasedDeleteOption() map[string]any {
	return map[string]any{"deleteOption": map[string]any{"propagationPolicy": "Foreground"}}
}

// deleteOptionStamp is the stamp of the deleteOption d on a ManifestWork
// ("": the operator's decision released).
func deleteOptionStamp(d decision.DeleteOption) stamp {
	return stamp{gvk: snapshot.ManifestWorkGVK, kind: "ManifestWork", action: "Orphaning",
		field: "spec.deleteOption", annotation: v1alpha1.OrphaningAnnotation, value: d.PropagationPolicy,
		spec: deleteOptionPatch(d), describe: d.Describe(),
		defaulted: defaultedPropagationPolicy, released: releasedDeleteOption}
}

// deleteOptionPatch makes, for a write, the spec fields of a stamp of d.
func deleteOptionPatch(d decision.DeleteOption) func() map[string]any {
	return func() map[string]any { return map[string]any{"deleteOption": deleteOptionSpec(d)} }
}

// deleteOptionSpec is the deleteOption a decision stamps.
func deleteOptionSpec(d decision.DeleteOption) map[string]any {
	option := map[string]any{"propagationPolicy": d.PropagationPolicy}
	if d.PropagationPolicy == "SelectivelyOrphan" {
		rules := make([]any, len(d.Orphans))
		for i, o := range d.Orphans {
			rule := map[string]any{"group": o.Group, "resource": o.Resource, "name": o.Name}
			if o.Namespace != "" {
				rule["namespace"] = o.Namespace
			}
			rules[i] = rule
		}
		option["selectivelyOrphans"] = map[string]any{"orphaningRules": rules}
	}
	return option
}

// Watches implements Adapter: a work is reconciled when its spec, labels or
// annotations change, when its cluster's labels or governing policy change,
// and when a policy changes.
func (a *ManifestWorkAdapter) Watches(b *builder.Builder) *builder.Builder {
	return stampWatches(b, a.worksOfCluster, a.worksOfPolicy)
}

// policyOrClusterEvents lets every event of the watched policies and
// clusters through the controller-wide filter; their own predicates decide.
type policyOrClusterEvents struct{ predicate.Funcs }

func (policyOrClusterEvents) Update(e event.UpdateEvent) bool {
	gvk := e.ObjectNew.GetObjectKind().GroupVersionKind()
	return gvk == snapshot.CleanupPolicyGVK || gvk == snapshot.ManagedClusterGVK
}

func (a *ManifestWorkAdapter) worksOfCluster(_ context.Context, mc client.Object) []reconcile.Request {
	return []reconcile.Request{NamespaceRequest(mc.GetName())}
}

// worksOfPolicy maps a policy change to the works of the clusters it governs.
func (a *ManifestWorkAdapter) worksOfPolicy(ctx context.Context, p client.Object) []reconcile.Request {
	clusters, err := clustersOf(ctx, a.Client, p.GetName())
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing the clusters of a policy", "policy", p.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, clusters.Len())
	for _, c := range sets.List(clusters) {
		reqs = append(reqs, NamespaceRequest(c))
	}
	return reqs
}

// List implements NamespaceAdapter: the works of a cluster, from the
// cache. The cache keeps only the identity of each manifest
// (snapshot.CompactManifest): when g's policy decides on more
// (cel.Policy.ReadsManifests), the manifests the API server stores for the
// generation the cache holds are read in one list of the namespace. A work
// the API server holds at another generation, or no more, is left out: the
// cache is behind, and the work's event brings it back.
//
// The works are not copied from the cache: each is the cached struct's
// shallow copy, whose maps and slices are the cache's. Nothing that
// decides or stamps a work writes into it: a read of the work again goes
// into a copy (stamper.recheck) or an object of its own (defaultedField,
// ListWithManifests).
func (a *ManifestWorkAdapter) List(ctx context.Context, namespace string, g *decision.Governed) ([]*workv1.ManifestWork, error) {
	var works workv1.ManifestWorkList
	if err := a.Client.List(ctx, &works, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var unread map[types.UID]error
	if g.Suspended == "" && g.Held == nil && g.Policy != nil && g.Policy.ReadsManifests() && (g.Cluster == nil || g.Cluster.GetDeletionTimestamp() == nil) {
		var err error
		if unread, err = snapshot.ListWithManifests(ctx, a.APIReader, namespace, works.Items); err != nil {
			return nil, err
		}
	}
	out := make([]*workv1.ManifestWork, 0, len(works.Items))
	for i := range works.Items {
		if err := unread[works.Items[i].UID]; err != nil {
			logf.FromContext(ctx).V(1).Info("the cache is behind the API server; decided on the work's next event",
				"namespace", namespace, "name", works.Items[i].Name, "error", err.Error())
			continue
		}
		out = append(out, &works.Items[i])
	}
	return out, nil
}
