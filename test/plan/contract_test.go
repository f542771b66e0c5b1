package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Plan is what the test reads of `kubectl cleanup plan CLUSTER -o json`:
// the fields docs/developer/design.md's Plan contract promises, nothing else.
type Plan struct {
	Cluster          string `json:"cluster"`
	Policy           string `json:"policy"`
	PolicyGeneration int64  `json:"policyGeneration"`
	Strategy         string `json:"strategy"`
	// Held, when not empty, says why nothing would be done.
	Held string `json:"held"`
	// DryRun is true when the governing policy is in dry run: the operator
	// reports the plan and writes nothing.
	DryRun bool   `json:"dryRun"`
	Steps  []Step `json:"steps"`
}

// Step is one step of a plan: orphaning, signal, gate, stage, namespace
// or finish, with its state (done, next, later) and its actions.
type Step struct {
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	State   string   `json:"state"`
	Actions []Action `json:"actions"`
}

// Action is what a step does with one object.
type Action struct {
	Verb      string `json:"verb"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Group orders the actions of a step: group 0 before group 1.
	Group int `json:"group"`
	// DeleteOption is what a stamp writes: Orphan, SelectivelyOrphan or "".
	DeleteOption string `json:"deleteOption"`
	// Finalizer is what force and removeFinalizer remove.
	Finalizer string `json:"finalizer"`
	For       string `json:"for"`
	// Collection, on a delete, says that its group goes in one
	// deletecollection request.
	Collection bool `json:"collection"`
}

// writeVerbs are the actions that write; wait, keep and hold write nothing.
var writeVerbs = []string{"stamp", "label", "unlabel", "delete", "force", "recordUnconfirmed", "removeFinalizer"}

func isWrite(verb string) bool { return slices.Contains(writeVerbs, verb) }

// decodePlan reads the plugin's JSON output. A plan without steps that is
// not held is not the contract's plan.
func decodePlan(raw []byte) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decoding the plan: %w: %s", err, excerpt(raw))
	}
	if p.Held == "" && len(p.Steps) == 0 {
		return nil, fmt.Errorf("the plan of %q has no steps and is not held: `kubectl cleanup plan -o json` does not print the Plan contract (steps with actions): %s", p.Cluster, excerpt(raw))
	}
	return &p, nil
}

// clusterScoped are the resources whose objects have no namespace; the
// comparison ignores a namespace the plan gives them.
var clusterScoped = []string{"namespaces", "managedclusters.cluster.open-cluster-management.io"}

// object names one object as the plan and the audit log both name it.
type object struct {
	Resource  string
	Namespace string
	Name      string
}

func objectOf(resource, namespace, name string) object {
	if slices.Contains(clusterScoped, resource) {
		namespace = ""
	}
	return object{Resource: resource, Namespace: namespace, Name: name}
}

func (o object) String() string {
	if o.Namespace == "" {
		return o.Resource + " " + o.Name
	}
	return o.Resource + " " + o.Namespace + "/" + o.Name
}

// block is the writes a plan expects together: the write actions of one
// group of one step. Blocks follow each other in plan order; the writes of
// one block may come in any order, except that one object's writes keep
// the order the plan lists them in.
type block struct {
	step    int // index in Plan.Steps
	kind    string
	name    string
	group   int
	actions []Action
}

func (b block) label() string {
	s := b.kind
	if b.name != "" {
		s += " " + b.name
	}
	return fmt.Sprintf("%s (step %d, group %d)", s, b.step+1, b.group)
}

// expectedBlocks are the plan's write actions, in the order the operator
// must make them. Steps already done make no more writes; a held plan and
// a dry run make none.
func expectedBlocks(p *Plan) []block {
	if p.Held != "" || p.DryRun {
		return nil
	}
	var out []block
	for i, s := range p.Steps {
		if s.State == "done" {
			continue
		}
		byGroup := map[int][]Action{}
		for _, a := range s.Actions {
			if isWrite(a.Verb) {
				byGroup[a.Group] = append(byGroup[a.Group], a)
			}
		}
		groups := make([]int, 0, len(byGroup))
		for g := range byGroup {
			groups = append(groups, g)
		}
		slices.Sort(groups)
		for _, g := range groups {
			out = append(out, block{step: i, kind: s.Kind, name: s.Name, group: g, actions: byGroup[g]})
		}
	}
	return out
}

// describePlan lists a plan's steps and actions, writes and waits, for a
// failure message.
func describePlan(p *Plan) string {
	var b strings.Builder
	if p.Policy == "" {
		fmt.Fprintf(&b, "plan of %s: no policy", p.Cluster)
	} else {
		fmt.Fprintf(&b, "plan of %s: policy %s (generation %d), strategy %s", p.Cluster, p.Policy, p.PolicyGeneration, p.Strategy)
	}
	if p.Held != "" {
		fmt.Fprintf(&b, ", held: %s", p.Held)
	}
	if p.DryRun {
		fmt.Fprintf(&b, ", dry run")
	}
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "\n  %d. %s %s [%s]", i+1, s.Kind, s.Name, s.State)
		for _, a := range s.Actions {
			fmt.Fprintf(&b, "\n       g%d %s %s", a.Group, a.Verb, objectOf(a.Resource, a.Namespace, a.Name))
			if a.DeleteOption != "" {
				fmt.Fprintf(&b, " deleteOption=%s", a.DeleteOption)
			}
			if a.Finalizer != "" {
				fmt.Fprintf(&b, " finalizer=%s", a.Finalizer)
			}
			if a.For != "" {
				fmt.Fprintf(&b, " (%s)", a.For)
			}
		}
	}
	return b.String()
}
