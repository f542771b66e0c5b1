package decision

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// DryRunReport is what a dry run reports instead of acting: every step not
// done yet, as what would happen. A decision that failed is reported as in
// a teardown (CleanupFailed), not hidden in the plan.
func (p *Plan) DryRunReport() *Report {
	var parts []string
	for _, s := range p.Steps {
		if s.Undecided && s.Report != nil {
			return s.Report
		}
	}
	for _, s := range p.Steps {
		if s.State != StateDone {
			parts = append(parts, s.wouldDo(p.Cluster)...)
		}
	}
	return &Report{Reason: v1alpha1.DryRunReason, Event: v1alpha1.DryRunReason,
		Message: fmt.Sprintf("dry run, nothing is deleted (strategy %s): %s", p.Strategy, strings.Join(parts, "; "))}
}

// wouldDo says what a step would do, for a dry run.
func (s *Step) wouldDo(cluster string) []string {
	var holds []string
	for _, a := range s.Actions {
		if a.Verb == VerbHold {
			holds = append(holds, a.For)
		}
	}
	switch s.Kind {
	case StepOrphaning:
		return s.wouldOrphan(holds)
	case StepSignal:
		msg := fmt.Sprintf("would label namespace %s %s=true", cluster, v1alpha1.ClusterDeletingLabel)
		switch work := s.work(); {
		case len(holds) > 0:
			msg += "; would hold: " + holds[0]
		case work != nil:
			msg += " and delete the deletion-signal work " + work.Name
		}
		return []string{msg}
	case StepGate:
		if len(holds) > 0 {
			return []string{"would hold: " + holds[0]}
		}
		if s.Report != nil {
			return []string{"would wait: " + s.Report.Message}
		}
		if len(s.Actions) == 0 {
			// Nothing monitored is there: the gate has nothing to wait for.
			return nil
		}
		return []string{fmt.Sprintf("would wait for %d monitored object(s) to be removed by their controllers: %s", len(s.Actions), Bounded(s.Objects(), ", "))}
	case StepStage:
		if len(holds) > 0 {
			return []string{"would hold: " + holds[0]}
		}
		if len(s.Actions) == 0 {
			return nil
		}
		resource, _, _ := strings.Cut(s.Resource, ".")
		return []string{fmt.Sprintf("stage %s would delete %d %s: %s", s.Name, len(s.Objects()), resource, Bounded(s.Objects(), ", "))}
	case StepNamespace:
		if len(holds) > 0 {
			return []string{"would hold: " + holds[0]}
		}
		for _, a := range s.Actions {
			if a.Verb == VerbDelete {
				return []string{"would delete namespace " + a.Name}
			}
			return []string{"would keep namespace " + a.Name}
		}
	}
	return nil
}

// wouldOrphan says what the orphaning step would do, for a dry run.
func (s *Step) wouldOrphan(holds []string) []string {
	var out []string
	waits := 0
	for _, a := range s.Actions {
		switch {
		case a.Verb == VerbStamp:
			want := DeleteOption{PropagationPolicy: a.DeleteOption}
			if a.Option != nil {
				want = *a.Option
			}
			out = append(out, fmt.Sprintf("would set %s deleteOption %s", a.key(), want.Describe()))
		case a.Verb == VerbWait:
			waits++
		}
	}
	if waits > 0 {
		out = append(out, fmt.Sprintf("would wait for the work agent to apply the deleteOption of %d ManifestWork(s)", waits))
	}
	if len(holds) > 0 {
		out = append(out, "would hold: "+Bounded(holds, "; "))
	}
	return out
}

// work is the object of a step's first action on an object in the cluster
// namespace.
func (s *Step) work() *Action {
	for i := range s.Actions {
		if s.Actions[i].Namespace != "" {
			return &s.Actions[i]
		}
	}
	return nil
}

// Objects are the objects a step acts on (resource/name), each once: an
// object can be deleted, then forced.
func (s *Step) Objects() []string {
	out := make([]string, 0, len(s.Actions))
	for _, a := range s.Actions {
		if k := a.key(); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// key names an action's object as messages do: resource/name.
func (a Action) key() string {
	resource, _, _ := strings.Cut(a.Resource, ".")
	return resource + "/" + a.Name
}
