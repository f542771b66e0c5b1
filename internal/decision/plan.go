package decision

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// ClusterPlan is what the governing policy would do with a cluster's content
// if the cluster were deleted now, step by step, in the order the operator
// takes the steps. The command-line preview prints it; the operator takes
// the same decisions through the same functions.
type ClusterPlan struct {
	Cluster string `json:"cluster"`
	// Policy governs the cluster; empty when none does, or when Held.
	Policy           string `json:"policy,omitempty"`
	PolicyGeneration int64  `json:"policyGeneration,omitempty"`
	// Held says why no decision can be taken now; nothing would be deleted.
	Held   string `json:"held,omitempty"`
	DryRun bool   `json:"dryRun,omitempty"`
	// Deleting is true when the cluster is already being deleted.
	Deleting  bool                        `json:"deleting,omitempty"`
	Strategy  v1alpha1.RemoveStrategyType `json:"strategy,omitempty"`
	Timeout   string                      `json:"timeout,omitempty"`
	Available bool                        `json:"available"`
	// OrphanAll is true under Needless: every work is orphaned first.
	OrphanAll bool           `json:"orphanAll,omitempty"`
	Signal    *SignalPlan    `json:"signal,omitempty"`
	Gate      GatePlan       `json:"gate"`
	Stages    []StagePlan    `json:"stages"`
	Namespace *NamespacePlan `json:"namespace,omitempty"`
	Works     []WorkPlan     `json:"works,omitempty"`
	Prune     []PrunePlan    `json:"prune,omitempty"`
}

// SignalPlan is the deletion signal: the work deleted first.
type SignalPlan struct {
	Work string `json:"work"`
	// Present is false when the signal work does not exist (yet).
	Present bool `json:"present"`
}

// GatePlan is what the cleanup waits for before anything is deleted.
type GatePlan struct {
	Resources []string `json:"resources,omitempty"`
	// Holding are the monitored objects that exist now.
	Holding []string `json:"holding,omitempty"`
}

// StagePlan is one deletion stage and its objects, in deletion order.
type StagePlan struct {
	Name     string      `json:"name"`
	Resource string      `json:"resource"`
	Groups   []GroupPlan `json:"groups,omitempty"`
}

// GroupPlan is a set of objects deleted together: those sharing a
// cleanup-priority.
type GroupPlan struct {
	Priority string   `json:"priority"`
	Objects  []string `json:"objects"`
}

// NamespacePlan is the decision for the cluster namespace.
type NamespacePlan struct {
	Name string `json:"name"`
	Keep bool   `json:"keep"`
}

// WorkPlan is the deleteOption decided for a ManifestWork.
type WorkPlan struct {
	Name string `json:"name"`
	// PropagationPolicy is Orphan, SelectivelyOrphan, or empty (the work's
	// default: its resources are deleted with it).
	PropagationPolicy string       `json:"propagationPolicy,omitempty"`
	Orphaned          []OrphanPlan `json:"orphaned,omitempty"`
	Error             string       `json:"error,omitempty"`
}

// OrphanPlan is one manifest left on the managed cluster, and the rule that
// keeps it.
type OrphanPlan struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Rule      string `json:"rule"`
}

// PrunePlan is the pruneObjectBehavior decided for a ConfigurationPolicy,
// or for a ConfigurationPolicy template of a Policy.
type PrunePlan struct {
	// Object is "ConfigurationPolicy <name>" or "Policy <name> template <name>".
	Object   string                 `json:"object"`
	Behavior v1alpha1.PruneBehavior `json:"behavior,omitempty"`
	// Ineffective is true when the behaviour has no effect (inform).
	Ineffective bool   `json:"ineffective,omitempty"`
	Error       string `json:"error,omitempty"`
	// HubTemplate, for a template that does not read its decision, is the
	// line that makes it do so.
	HubTemplate string `json:"hubTemplate,omitempty"`
}

// PlanInput is what a cluster namespace holds, as read by the caller.
type PlanInput struct {
	// Cluster is the name of the cluster, and so of its namespace.
	Cluster string
	// Available is the cluster's ManagedClusterConditionAvailable.
	Available bool
	// Namespace is the cluster namespace; nil when there is none.
	Namespace map[string]any
	// Objects are the objects of the policy's resources (Resources) and of
	// ManifestWorks in the namespace.
	Objects map[schema.GroupVersionResource][]Object
}

// PlanCluster computes the plan of a cluster's cleanup: strategy, signal,
// gate, stages and namespace. Works and prune decisions are added by the
// caller, which reads their manifests and templates. A namespace not named
// after the cluster is refused: it is never planned for deletion.
func PlanCluster(p *cel.Policy, a *cel.Activation, in PlanInput) (*ClusterPlan, error) {
	plan := &ClusterPlan{
		Cluster: in.Cluster, Policy: p.Name, PolicyGeneration: p.Generation, DryRun: p.Spec.DryRun,
		Timeout: Timeout(p).String(), Available: in.Available,
	}
	strategy, err := Strategy(p, a)
	if err != nil {
		return nil, fmt.Errorf("removeStrategy: %w", err)
	}
	plan.Strategy = strategy
	plan.OrphanAll = strategy == v1alpha1.RemoveStrategyNeedless

	signal := SignalWorkName(p)
	if signal != "" {
		plan.Signal = &SignalPlan{Work: signal}
		for _, w := range in.Objects[ManifestWorks] {
			if w.Meta.Name == signal {
				plan.Signal.Present = true
			}
		}
	}

	for _, m := range MonitoredResources(p) {
		plan.Gate.Resources = append(plan.Gate.Resources, ResourceName(m.GVR))
	}
	holding, err := Gate(p, a, in.Objects)
	if err != nil {
		return nil, fmt.Errorf("monitoredResources: %w", err)
	}
	for _, o := range holding {
		plan.Gate.Holding = append(plan.Gate.Holding, o.Key())
	}

	stages := Stages(p)
	assigned, err := AssignStages(p, a, stages, in.Objects, func(o Object) bool {
		return o.GVR == ManifestWorks && signal != "" && o.Meta.Name == signal
	})
	if err != nil {
		return nil, fmt.Errorf("deletionStages: %w", err)
	}
	for i, s := range stages {
		sp := StagePlan{Name: s.Name, Resource: ResourceName(s.GVR)}
		for _, g := range Groups(assigned[i]) {
			gp := GroupPlan{Priority: PriorityName(g[0].Meta)}
			for _, o := range g {
				name := o.Meta.Name
				if o.Meta.DeletionTimestamp != nil {
					name += " (deleting)"
				}
				gp.Objects = append(gp.Objects, name)
			}
			sp.Groups = append(sp.Groups, gp)
		}
		plan.Stages = append(plan.Stages, sp)
	}

	if in.Namespace != nil {
		md, _ := in.Namespace["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		if name != in.Cluster {
			// Never a namespace whose name is not the cluster's.
			return nil, fmt.Errorf("namespace %q is not the namespace of cluster %q", name, in.Cluster)
		}
		keep, err := KeepNamespace(p, a, in.Namespace)
		if err != nil {
			return nil, fmt.Errorf("keepNamespace: %w", err)
		}
		plan.Namespace = &NamespacePlan{Name: name, Keep: keep}
	}
	return plan, nil
}

// Groups splits a stage, already in deletion order, into the groups deleted
// one after the other.
func Groups(stage []Object) [][]Object {
	var out [][]Object
	for len(stage) > 0 {
		g := FirstGroup(stage)
		out = append(out, g)
		stage = stage[len(g):]
	}
	return out
}

// PriorityName names a deletion order: "unset", "invalid" or the value.
func PriorityName(o metav1.Object) string {
	switch n := DeletionOrder(o); n {
	case -2:
		return "unset"
	case -1:
		return "invalid"
	default:
		return strconv.Itoa(n)
	}
}

// WorkPlanOf turns an orphaning decision into its plan.
func WorkPlanOf(name string, d DeleteOption) WorkPlan {
	w := WorkPlan{Name: name, PropagationPolicy: d.PropagationPolicy}
	for i, o := range d.Orphans {
		w.Orphaned = append(w.Orphaned, OrphanPlan{Resource: o.Resource, Namespace: o.Namespace, Name: o.Name, Rule: d.Rules[i]})
	}
	return w
}

// SortWorks orders work plans by name.
func SortWorks(works []WorkPlan) {
	slices.SortFunc(works, func(a, b WorkPlan) int { return strings.Compare(a.Name, b.Name) })
}

// ResourceName names a resource as kubectl does: resource.group.
func ResourceName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}
