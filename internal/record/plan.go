package record

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// StepName names a plan step in entries: its kind, and a stage's name.
func StepName(s *decision.Step) string {
	if s.Kind == decision.StepStage && s.Name != "" {
		return string(s.Kind) + "/" + s.Name
	}
	return string(s.Kind)
}

// EntryOf is the entry of a plan action, when the action is one a record
// lists: deletes, orphaning stamps, forces, keeps, and the namespace's
// labels. Waits, holds and the cluster's own writes are not entries.
func EntryOf(plan *decision.Plan, step *decision.Step, act decision.Action, state State, t time.Time) (Entry, bool) {
	e := Entry{Step: StepName(step), State: state, Resource: act.Resource, Namespace: act.Namespace, Name: act.Name,
		UID: act.UID, Priority: act.Priority, Time: metav1.NewTime(t)}
	switch act.Verb {
	case decision.VerbDelete:
		e.Action = Deleted
		if act.Resource == decision.ResourceName(decision.ManifestWorks) {
			e.DeleteOption = workOption(plan, act.Name)
		}
	case decision.VerbStamp:
		e.Action, e.DeleteOption = Orphaned, stampOption(act)
		if act.DeleteOption == "" {
			e.Action = Stamped
		}
	case decision.VerbForce:
		e.Action, e.Finalizers = Forced, []string{act.Finalizer}
	case decision.VerbKeep:
		e.Action, e.Note = Kept, act.For
	case decision.VerbLabel:
		e.Action, e.Note = Labelled, act.For
	case decision.VerbUnlabel:
		e.Action, e.Note = Unlabelled, act.For
		if step.Kind == decision.StepNamespace {
			e.Action = Kept
		}
	default:
		return Entry{}, false
	}
	return e, true
}

// stampOption describes the deleteOption a stamp writes.
func stampOption(act decision.Action) string {
	if act.Option != nil {
		return compactOption(act.DeleteOption, len(act.Option.Orphans))
	}
	return compactOption(act.DeleteOption, len(act.Orphaned))
}

// workOption describes the deleteOption of a work the plan decided, when
// it orphans something.
func workOption(plan *decision.Plan, name string) string {
	for _, w := range plan.Works {
		if w.Name == name {
			return compactOption(w.PropagationPolicy, len(w.Orphaned))
		}
	}
	return ""
}

func compactOption(policy string, orphans int) string {
	switch policy {
	case "":
		return ""
	case "SelectivelyOrphan":
		return fmt.Sprintf("SelectivelyOrphan (%d manifest(s))", orphans)
	}
	return policy
}

// Entries are the entries of actions, as intended at t.
func Entries(plan *decision.Plan, step *decision.Step, acts []decision.Action, t time.Time) []Entry {
	var out []Entry
	for _, act := range acts {
		if e, ok := EntryOf(plan, step, act, Intended, t); ok {
			out = append(out, e)
		}
	}
	return out
}

// KeptEntries are the entries of what the plan's done steps keep (a namespace
// keepNamespace keeps): they involve no write, and are listed as done.
func KeptEntries(plan *decision.Plan, t time.Time) []Entry {
	var out []Entry
	for i := range plan.Steps {
		st := &plan.Steps[i]
		if st.State != decision.StateDone {
			continue
		}
		for _, act := range st.Actions {
			if act.Verb == decision.VerbKeep {
				e, _ := EntryOf(plan, st, act, Done, t)
				out = append(out, e)
			}
		}
	}
	return out
}

// HoldOf is why the plan holds, if it does: the plan itself, or a hold
// action of its next step; extra are holds the executor met.
func HoldOf(plan *decision.Plan, extra []string) string {
	if plan.Held != "" {
		return plan.Held
	}
	var why []string
	if st := plan.Next(); st != nil {
		for _, act := range st.Actions {
			if act.Verb == decision.VerbHold {
				why = append(why, act.For)
			}
		}
	}
	why = append(why, extra...)
	if h := plan.OutOfOrderHold(); h != "" {
		why = append(why, h)
	}
	return strings.Join(why, "; ")
}

// SignalOf is the outcome of the deletion signal as the plan and the
// record's entries tell it.
func SignalOf(plan *decision.Plan, r *Record) *Signal {
	i := slices.IndexFunc(plan.Steps, func(s decision.Step) bool { return s.Kind == decision.StepSignal })
	if i < 0 {
		return r.Signal // a plan that does not reach the signal (held, released)
	}
	st := &plan.Steps[i]
	sig := &Signal{Work: st.Name}
	var deleted, forced, stamped bool
	for _, e := range r.Entries {
		if e.Step != string(decision.StepSignal) && !(e.Step == string(decision.StepOrphaning) && e.Name == st.Name) {
			continue
		}
		if e.Resource != decision.ResourceName(decision.ManifestWorks) || e.Name != st.Name {
			continue
		}
		switch e.Action {
		case Deleted:
			deleted = true
		case Forced:
			forced = true
		case Orphaned:
			stamped = true
		}
	}
	held := slices.ContainsFunc(st.Actions, func(a decision.Action) bool { return a.Verb == decision.VerbHold })
	switch {
	case st.Name == "":
		sig.Outcome = SignalNone
	case held:
		sig.Outcome = SignalHeld
	case forced:
		sig.Outcome = SignalForced
	case deleted && st.State == decision.StateDone:
		sig.Outcome = SignalRemoved
		if stamped && plan.Strategy == "Needless" {
			sig.Outcome = SignalOrphaned
		}
	case deleted:
		sig.Outcome = SignalWaiting
	case st.State == decision.StateDone:
		sig.Outcome = SignalAbsent
		if r.Signal != nil && r.Signal.Outcome != SignalPending && r.Signal.Outcome != SignalAbsent {
			sig.Outcome = r.Signal.Outcome // a record resumed after the signal keeps what it knew
		}
	default:
		sig.Outcome = SignalPending
	}
	return sig
}

// DryRun is the record of what the plan would do, every step's actions
// listed as would-be entries, as of now.
func DryRun(plan *decision.Plan, uid string, start, now time.Time) *Record {
	end := metav1.NewTime(now)
	r := &Record{Cluster: plan.Cluster, Policy: plan.Policy, PolicyGeneration: plan.PolicyGeneration,
		Strategy: string(plan.Strategy), DryRun: true, Start: metav1.NewTime(start), End: &end, Entries: []Entry{}}
	r.UID = typesUID(uid)
	r.Name = Name(plan.Cluster, r.UID, true)
	for i := range plan.Steps {
		st := &plan.Steps[i]
		for _, act := range st.Actions {
			if e, ok := EntryOf(plan, st, act, Would, now); ok {
				r.Add(e)
			}
		}
	}
	r.Signal = SignalOf(plan, r)
	if why := HoldOf(plan, nil); why != "" {
		r.Holds = []Hold{{Reason: why, Start: metav1.NewTime(now)}}
	}
	r.Outcome, r.Message = "DryRun", "nothing was done: the policy is in dry run; this is what the teardown would do, as planned at the end time"
	return r
}

// Fingerprint identifies what a dry-run record says, times aside, so that
// it is written once per change of plan.
func Fingerprint(r *Record) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", r.Policy, r.PolicyGeneration, r.Strategy)
	for _, e := range r.Entries {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%v\x00%s\n", e.Step, e.Action, e.Resource, e.Namespace, e.Name, e.UID,
			e.DeleteOption, e.Finalizers, e.Note)
	}
	for _, hold := range r.Holds {
		fmt.Fprintf(h, "hold %s\n", hold.Reason)
	}
	if r.Signal != nil {
		fmt.Fprintf(h, "signal %s %s\n", r.Signal.Work, r.Signal.Outcome)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// OptionOf describes a deleteOption as entries do.
func OptionOf(d decision.DeleteOption) string {
	return compactOption(d.PropagationPolicy, len(d.Orphans))
}

// AgentNotes are what the work agent says, in its Deleting condition, of
// the works the plan's next step waits for, by UID.
func AgentNotes(plan *decision.Plan) map[types.UID]string {
	st := plan.Next()
	if st == nil {
		return nil
	}
	out := map[types.UID]string{}
	for _, act := range st.Actions {
		if act.Agent != "" {
			out[act.UID] = "the work agent reports " + act.Agent
		}
	}
	return out
}

// NoteAgent writes on each deleted work's entry what the work agent says
// of it while it deletes it (AgentNotes); it reports whether a note changed.
func (r *Record) NoteAgent(notes map[types.UID]string) bool {
	changed := false
	for i := range r.Entries {
		e := &r.Entries[i]
		if note, ok := notes[e.UID]; ok && e.Action == Deleted && e.Note != note {
			e.Note, changed = note, true
		}
	}
	return changed
}
