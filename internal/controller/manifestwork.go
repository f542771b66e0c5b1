package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
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
)

// ManifestWorkAdapter stamps each governed ManifestWork with the
// deleteOption its policy's orphaning rules decide.
type ManifestWorkAdapter struct {
	stamper
	Mapper meta.RESTMapper
}

// NewManifestWorkAdapter returns the adapter. apiReader reads a work from
// the API server, managedFields included, when an apply conflicts.
func NewManifestWorkAdapter(c client.Client, apiReader client.Reader, mapper meta.RESTMapper, recorder events.EventRecorder, tally *Tally) *ManifestWorkAdapter {
	return &ManifestWorkAdapter{stamper: stamper{Client: c, APIReader: apiReader, Recorder: recorder, Tally: tally}, Mapper: mapper}
}

var _ Adapter[*workv1.ManifestWork] = &ManifestWorkAdapter{}

// Name implements Adapter.
func (a *ManifestWorkAdapter) Name() string { return "manifestwork" }

// New implements Adapter.
func (a *ManifestWorkAdapter) New() *workv1.ManifestWork { return &workv1.ManifestWork{} }

// ClusterName implements Adapter: a work's cluster is its namespace.
func (a *ManifestWorkAdapter) ClusterName(w *workv1.ManifestWork) string { return w.GetNamespace() }

// Reconcile implements Adapter. The signal work is the cluster
// controller's; the works of a deleting cluster are the teardown's, which
// decides their deleteOption (Orphan for all under Needless) and waits for
// the agent to apply it: a rule decision stamped now would undo it.
func (a *ManifestWorkAdapter) Reconcile(ctx context.Context, w *workv1.ManifestWork, g *decision.Governed) (reconcile.Result, error) {
	skip := decision.IsSignalWork(w) || (g.Cluster != nil && g.Cluster.GetDeletionTimestamp() != nil)
	_, err := a.reconcileStamp(ctx, w, g, skip, "ManifestWork", "Orphaning", func() (stampDecision, error) {
		desired := decision.DeleteOption{}
		if g.Policy != nil {
			var err error
			if desired, err = a.decide(g, w); err != nil {
				return stampDecision{}, err
			}
		}
		current := desired.Equal(current(w))
		return stampDecision{current: current, pending: !current, stamp: stamp{gvk: manifestWorkGVK, kind: "ManifestWork", action: "Orphaning",
			field: "spec.deleteOption", annotation: v1alpha1.OrphaningAnnotation, value: desired.PropagationPolicy,
			spec: map[string]any{"deleteOption": deleteOptionSpec(desired)}, describe: describe(desired), defaulted: defaultedPropagationPolicy,
			released: map[string]any{"deleteOption": map[string]any{"propagationPolicy": "Foreground"}}}}, nil
	})
	return reconcile.Result{}, err
}

func (a *ManifestWorkAdapter) decide(g *decision.Governed, w *workv1.ManifestWork) (decision.DeleteOption, error) {
	return decideOrphaning(g, w, a.Mapper)
}

// decideOrphaning evaluates the governing policy's orphaning rules on a
// work's manifests. The operator and the command-line preview both call it.
func decideOrphaning(g *decision.Governed, w *workv1.ManifestWork, mapper meta.RESTMapper) (decision.DeleteOption, error) {
	// The cache keeps manifests as raw JSON; they become maps only here,
	// where rules read them.
	manifests := make([]map[string]any, 0, len(w.Spec.Workload.Manifests))
	for i, m := range w.Spec.Workload.Manifests {
		var obj map[string]any
		if err := json.Unmarshal(m.Raw, &obj); err != nil || obj == nil {
			return decision.DeleteOption{}, fmt.Errorf("manifest %d is not an object", i)
		}
		manifests = append(manifests, obj)
	}
	work, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		return decision.DeleteOption{}, err
	}
	work["apiVersion"], work["kind"] = manifestWorkGVK.GroupVersion().String(), manifestWorkGVK.Kind
	reported := map[int]workv1.ManifestResourceMeta{}
	for _, m := range w.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Resource != "" {
			reported[int(m.ResourceMeta.Ordinal)] = m.ResourceMeta
		}
	}
	resourceOf := func(i int, gvk schema.GroupVersionKind) (string, error) {
		if r, ok := reported[i]; ok && r.Group == gvk.Group && r.Version == gvk.Version && r.Kind == gvk.Kind {
			return r.Resource, nil
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return "", fmt.Errorf("neither the work agent nor the API server knows its resource: %w", err)
		}
		return mapping.Resource.Resource, nil
	}
	return decision.Orphaning(g.Policy, g.Activation, work, manifests, resourceOf)
}

// current reads the deleteOption a work carries.
func current(w *workv1.ManifestWork) decision.DeleteOption {
	var d decision.DeleteOption
	if w.Spec.DeleteOption == nil {
		return d
	}
	d.PropagationPolicy = string(w.Spec.DeleteOption.PropagationPolicy)
	if d.PropagationPolicy == string(workv1.DeletePropagationPolicyTypeForeground) {
		d.PropagationPolicy = ""
	}
	if so := w.Spec.DeleteOption.SelectivelyOrphan; so != nil {
		for _, r := range so.OrphaningRules {
			d.Orphans = append(d.Orphans, decision.Orphan{Group: r.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name})
		}
	}
	return d
}

func describe(d decision.DeleteOption) string {
	switch d.PropagationPolicy {
	case "":
		return "unset (Foreground)"
	case "Orphan":
		return "Orphan (every manifest stays on the managed cluster)"
	}
	var parts []string
	for i, o := range d.Orphans {
		part := o.Resource + "/" + o.Name
		if i < len(d.Rules) { // a decision names its rules; a value read from a work does not
			part += " by rule " + d.Rules[i]
		}
		parts = append(parts, part)
	}
	return "SelectivelyOrphan: " + strings.Join(parts, ", ")
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
	return gvk == cleanupPolicyGVK || gvk == managedClusterGVK
}

func (a *ManifestWorkAdapter) worksOfCluster(ctx context.Context, mc client.Object) []reconcile.Request {
	return a.worksIn(ctx, mc.GetName())
}

// worksOfPolicy maps a policy change to the works of the clusters it governs.
func (a *ManifestWorkAdapter) worksOfPolicy(ctx context.Context, p client.Object) []reconcile.Request {
	clusters, err := clustersOf(ctx, a.Client, p.GetName())
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing the clusters of a policy", "policy", p.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range sets.List(clusters) {
		reqs = append(reqs, a.worksIn(ctx, c)...)
	}
	return reqs
}

func (a *ManifestWorkAdapter) worksIn(ctx context.Context, namespace string) []reconcile.Request {
	works, err := listWorksMetadata(ctx, a.Client, client.InNamespace(namespace))
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing works", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, len(works))
	for i := range works {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: works[i].Name}}
	}
	return reqs
}
