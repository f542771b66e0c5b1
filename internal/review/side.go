package review

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Side is what the decisions say of one cluster under one set of policies:
// the governing policy, and what deleting the cluster would do.
type Side struct {
	// Policy governs the cluster; empty when none does.
	Policy string `json:"policy,omitempty"`
	// Held says why a deletion would do nothing at all.
	Held string `json:"held,omitempty"`
	// Suspended says why the operator would write nothing for now.
	Suspended string `json:"suspended,omitempty"`
	Strategy  string `json:"strategy,omitempty"`
	// BlastRadius says why the policy's blast radius would not let the
	// teardown of a cluster being deleted begin: its reason
	// (BlastRadiusExceeded, WaitingForTurn) and message.
	BlastRadius string `json:"blastRadius,omitempty"`
	// Protected says the cluster is protected from deletion;
	// ProtectionError is the run-time error of spec.deletionProtection.
	Protected       bool   `json:"protected,omitempty"`
	ProtectionError string `json:"protectionError,omitempty"`
	// Delete are the objects a deletion would delete (resource
	// namespace/name), in order; Orphan the works whose resources it would
	// leave on the managed cluster (name: Orphan, or SelectivelyOrphan and
	// the manifests kept); Keep what it keeps (the namespace) and Hold what
	// it would wait on, with why.
	Delete []string `json:"delete,omitempty"`
	Orphan []string `json:"orphan,omitempty"`
	Keep   []string `json:"keep,omitempty"`
	Hold   []string `json:"hold,omitempty"`
	// Prune are the prune behaviours of the ConfigurationPolicies.
	Prune []string `json:"prune,omitempty"`
}

// sideOf summarizes a plan.
func sideOf(plan *decision.Plan) Side {
	s := Side{Policy: plan.Policy, Held: plan.Held, Suspended: plan.Suspended, Strategy: string(plan.Strategy)}
	if p := plan.Protection; p != nil {
		s.Protected, s.ProtectionError = p.Protected, p.Error
	}
	for _, st := range plan.Steps {
		if st.Kind == decision.StepBlastRadius && st.Report != nil {
			s.BlastRadius = st.Report.Reason + ": " + st.Report.Message
			continue
		}
		if st.Undecided {
			s.Hold = append(s.Hold, fmt.Sprintf("%s %s: undecided", st.Kind, st.Name))
		}
		for _, a := range st.Actions {
			obj := objectOf(a.Resource, a.Namespace, a.Name)
			switch a.Verb {
			case decision.VerbDelete, decision.VerbForce:
				s.Delete = appendNew(s.Delete, obj)
			case decision.VerbKeep:
				s.Keep = appendNew(s.Keep, withWhy(obj, a.For))
			case decision.VerbHold:
				s.Hold = appendNew(s.Hold, withWhy(obj, a.For))
			}
		}
	}
	for _, w := range plan.Works {
		switch {
		case w.Error != "":
			s.Hold = append(s.Hold, withWhy("work "+w.Name, w.Error))
		case w.PropagationPolicy != "":
			s.Orphan = append(s.Orphan, orphanOf(w))
		}
	}
	for _, p := range plan.Prune {
		switch {
		case p.Error != "":
			s.Prune = append(s.Prune, p.Object+": error: "+p.Error)
		default:
			s.Prune = append(s.Prune, p.Object+": "+string(p.Behavior))
		}
	}
	return s
}

func orphanOf(w decision.WorkPlan) string {
	out := w.Name + ": " + w.PropagationPolicy
	if len(w.Orphaned) == 0 {
		return out
	}
	kept := make([]string, len(w.Orphaned))
	for i, o := range w.Orphaned {
		kept[i] = objectOf(o.Resource, o.Namespace, o.Name)
	}
	return out + " (" + strings.Join(kept, ", ") + ")"
}

func objectOf(resource, namespace, name string) string {
	if namespace != "" {
		name = namespace + "/" + name
	}
	return resource + " " + name
}

func withWhy(what, why string) string {
	if why == "" {
		return what
	}
	return what + ": " + why
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// changes names the fields of a cluster's sides that differ.
func changes(today, after Side) []string {
	var out []string
	add := func(name string, differs bool) {
		if differs {
			out = append(out, name)
		}
	}
	add("governance", today.Policy != after.Policy || today.Held != after.Held || today.Suspended != after.Suspended)
	add("strategy", today.Strategy != after.Strategy)
	add("blastRadius", today.BlastRadius != after.BlastRadius)
	add("protection", today.Protected != after.Protected || today.ProtectionError != after.ProtectionError)
	add("delete", !slices.Equal(today.Delete, after.Delete))
	add("orphan", !slices.Equal(today.Orphan, after.Orphan))
	add("keep", !slices.Equal(today.Keep, after.Keep))
	add("hold", !slices.Equal(today.Hold, after.Hold))
	add("prune", !slices.Equal(today.Prune, after.Prune))
	return out
}
