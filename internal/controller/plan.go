package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	workv1 "open-cluster-management.io/api/work/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// Planner computes, from a live API server, what the operator would do with
// a cluster: the governing policy, through snapshot.Reader.Govern, and its decisions,
// through the decision functions the reconcilers call. It only reads.
type Planner struct {
	Reader client.Reader
	Mapper meta.RESTMapper
	Fleet  *snapshot.Reader
}

// NewPlanner returns a planner that compiles policies against the CRD
// schemas the API server serves, as the operator does. A user who may not
// read CRDs gets untyped variables: the decisions are the same, only the
// type checks of the expressions are skipped.
func NewPlanner(ctx context.Context, r client.Reader, mapper meta.RESTMapper) (*Planner, error) {
	schemas, _, err := snapshot.LoadSchemas(ctx, r)
	switch {
	case apierrors.IsForbidden(err):
		schemas = cel.Schemas{}
	case err != nil:
		return nil, fmt.Errorf("reading the CRD schemas: %w", err)
	}
	env, err := cel.NewEnv(schemas)
	if err != nil {
		return nil, err
	}
	return &Planner{Reader: r, Mapper: mapper, Fleet: &snapshot.Reader{Client: r, Cache: cel.NewCache(env), Governance: decision.NewGovernance()}}, nil
}

// Plan is the plan of one cluster. A cluster no policy governs, or one that
// is held, has a plan that says so and decides nothing.
func (p *Planner) Plan(ctx context.Context, name string) (*decision.ClusterPlan, error) {
	g, err := p.Fleet.Govern(ctx, name, false)
	if err != nil {
		return nil, err
	}
	if g.Cluster == nil {
		return nil, fmt.Errorf("ManagedCluster %s not found", name)
	}
	deleting := g.Cluster.GetDeletionTimestamp() != nil
	switch {
	case g.Held != nil:
		return &decision.ClusterPlan{Cluster: name, Deleting: deleting, Held: "held, nothing would be deleted: " + g.Held.Error()}, nil
	case g.Policy == nil:
		return &decision.ClusterPlan{Cluster: name, Deleting: deleting,
			Held: "no CleanupPolicy governs the cluster: the operator would leave its content as it is"}, nil
	}

	in := decision.PlanInput{Cluster: name, Available: clusterAvailable(g.Cluster), Objects: map[schema.GroupVersionResource][]decision.Object{}}
	ns := &corev1.Namespace{}
	switch err := p.Reader.Get(ctx, client.ObjectKey{Name: name}, ns); {
	case err == nil:
		if in.Namespace, err = namespaceValue(ns); err != nil {
			return nil, err
		}
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	var works []workv1.ManifestWork
	if in.Namespace != nil {
		// The works are read whole, once: their metadata for the stages,
		// their manifests for the orphaning decisions.
		var list workv1.ManifestWorkList
		if err := p.Reader.List(ctx, &list, client.InNamespace(name)); err != nil {
			return nil, fmt.Errorf("listing ManifestWorks: %w", err)
		}
		works = list.Items
		metas := make([]metav1.PartialObjectMetadata, len(works))
		for i := range works {
			metas[i].SetGroupVersionKind(manifestWorkGVK)
			metas[i].ObjectMeta = works[i].ObjectMeta
		}
		if in.Objects[decision.ManifestWorks], err = policyObjects(decision.ManifestWorks, metas); err != nil {
			return nil, err
		}
		for _, gvr := range decision.Resources(g.Policy) {
			if _, done := in.Objects[gvr]; done {
				continue
			}
			if in.Objects[gvr], err = p.list(ctx, gvr, name); err != nil {
				return nil, err
			}
		}
	}

	plan, err := decision.PlanCluster(g.Policy, g.Activation, in)
	if err != nil {
		return &decision.ClusterPlan{Cluster: name, Deleting: deleting, Policy: g.Policy.Name,
			Held: "held, nothing would be deleted: " + err.Error()}, nil
	}
	plan.Cluster, plan.Deleting = name, deleting

	signal := decision.SignalWorkName(g.Policy)
	for i := range works {
		w := &works[i]
		if w.Labels[v1alpha1.SignalWorkLabel] == "true" || (signal != "" && w.Name == signal) {
			continue
		}
		d, err := teardownOrphaning(g, plan.Strategy, w, p.Mapper)
		wp := decision.WorkPlanOf(w.Name, d)
		if err != nil {
			wp = decision.WorkPlan{Name: w.Name, Error: err.Error()}
		}
		plan.Works = append(plan.Works, wp)
	}
	decision.SortWorks(plan.Works)

	if g.Policy.Spec.Prune != nil && in.Namespace != nil {
		if plan.Prune, err = p.prune(ctx, g, name); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// list lists the metadata of a resource's objects in a namespace; a
// resource the API server does not serve has none.
func (p *Planner) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]decision.Object, error) {
	gvk, err := p.Mapper.KindFor(gvr)
	if meta.IsNoMatchError(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := p.Reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", gvr.Resource, namespace, err)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return policyObjects(gvr, list.Items)
}

// prune decides pruneObjectBehavior for the ConfigurationPolicies in the
// cluster namespace and for the ConfigurationPolicy templates of the
// Policies placed on the cluster (decided on the root Policy's template).
func (p *Planner) prune(ctx context.Context, g *decision.Governed, namespace string) ([]decision.PrunePlan, error) {
	var out []decision.PrunePlan
	decide := func(object string, definition map[string]any) decision.PrunePlan {
		pp := decision.PrunePlan{Object: object}
		b, err := decision.PruneBehavior(g.Policy, g.Activation, definition)
		if err != nil {
			pp.Error = err.Error()
			return pp
		}
		pp.Behavior, pp.Ineffective = b, decision.Ineffective(b, definition)
		return pp
	}

	if _, err := p.Mapper.RESTMapping(configurationPolicyGVK.GroupKind(), configurationPolicyGVK.Version); err == nil {
		cps := &unstructured.UnstructuredList{}
		cps.SetGroupVersionKind(configurationPolicyGVK.GroupVersion().WithKind("ConfigurationPolicyList"))
		if err := p.Reader.List(ctx, cps, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("listing ConfigurationPolicies: %w", err)
		}
		for _, cp := range cps.Items {
			out = append(out, decide("ConfigurationPolicy "+cp.GetName(), cp.Object))
		}
	}

	if _, err := p.Mapper.RESTMapping(policyGVK.GroupKind(), policyGVK.Version); err != nil {
		return out, nil
	}
	replicated := newPolicyList()
	if err := p.Reader.List(ctx, replicated, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Policies: %w", err)
	}
	for _, rp := range replicated.Items {
		rootNS, rootName, ok := strings.Cut(rp.GetLabels()[RootPolicyLabel], ".")
		if !ok {
			continue
		}
		root := &unstructured.Unstructured{}
		root.SetGroupVersionKind(policyGVK)
		if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: rootNS, Name: rootName}, root); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		for _, t := range templates(root) {
			pp := decide(fmt.Sprintf("Policy %s/%s template %s", rootNS, rootName, t.name), t.definition)
			if !readsDecisions(t.definition) {
				pp.HubTemplate = DecisionHubTemplate(t.name)
			}
			out = append(out, pp)
		}
	}
	return out, nil
}

// ClusterStatus is where the cleanup of a deleted cluster stands.
type ClusterStatus struct {
	Cluster string `json:"cluster"`
	Policy  string `json:"policy,omitempty"`
	// Step is the reason of the ContentDeleteSuccess condition.
	Step    string `json:"step"`
	Message string `json:"message,omitempty"`
	// Since is when the cluster was deleted.
	Since metav1.Time `json:"since"`
	// Remaining counts what the cleanup still has to remove or wait for.
	Remaining Remaining `json:"remaining"`
}

// Remaining counts the objects a cleanup still waits for, by step.
type Remaining struct {
	Monitored int            `json:"monitored"`
	Stages    map[string]int `json:"stages,omitempty"`
	Namespace bool           `json:"namespace"`
}

// Status lists the clusters being deleted that carry the operator's
// finalizer, with their step and what remains.
func (p *Planner) Status(ctx context.Context) ([]ClusterStatus, error) {
	clusters := newManagedClusterList()
	if err := p.Reader.List(ctx, clusters); err != nil {
		return nil, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	out := []ClusterStatus{}
	for _, mc := range clusters.Items {
		if mc.GetDeletionTimestamp() == nil || !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
			continue
		}
		s := ClusterStatus{Cluster: mc.GetName(), Policy: mc.GetAnnotations()[v1alpha1.GoverningPolicyAnnotation],
			Since: *mc.GetDeletionTimestamp(), Step: "Pending"}
		if c := meta.FindStatusCondition(clusterConditions(&mc), v1alpha1.ContentDeleteSuccessCondition); c != nil {
			s.Step, s.Message = c.Reason, c.Message
		}
		plan, err := p.Plan(ctx, mc.GetName())
		if err != nil {
			return nil, err
		}
		s.Remaining.Monitored = len(plan.Gate.Holding)
		for _, st := range plan.Stages {
			n := 0
			for _, g := range st.Groups {
				n += len(g.Objects)
			}
			if n > 0 {
				if s.Remaining.Stages == nil {
					s.Remaining.Stages = map[string]int{}
				}
				s.Remaining.Stages[st.Name] = n
			}
		}
		s.Remaining.Namespace = plan.Namespace != nil && !plan.Namespace.Keep
		out = append(out, s)
	}
	return out, nil
}
