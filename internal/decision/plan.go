package decision

import (
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// WorkPlan is the deleteOption decided for a ManifestWork.
type WorkPlan struct {
	Name string `json:"name"`
	// PropagationPolicy is Orphan, SelectivelyOrphan, or empty (the work's
	// default: its resources are deleted with it).
	PropagationPolicy string       `json:"propagationPolicy,omitempty"`
	Orphaned          []OrphanPlan `json:"orphaned,omitempty"`
	Error             string       `json:"error,omitempty"`
	// Unreachable says why the operator does not give the work the
	// decision above (an add-on's work, AddonUnreachable): a teardown
	// holds before deleting it.
	Unreachable string `json:"unreachable,omitempty"`
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
