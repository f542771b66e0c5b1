package record

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Record is what one teardown of one cluster did, or, in a dry run, would
// do. The executor writes it as the teardown goes: the entries of the group
// it is about to act on first, as intended, then, once acted on, done.
type Record struct {
	// Name is the name of the ConfigMap that holds the record.
	Name    string    `json:"name"`
	Cluster string    `json:"cluster"`
	UID     types.UID `json:"uid"`
	// Policy is the CleanupPolicy that governs the teardown and
	// PolicyGeneration the generation that decided its latest step;
	// Decisions lists each policy and generation that decided a step, in
	// order, when more than one did.
	Policy           string     `json:"policy,omitempty"`
	PolicyGeneration int64      `json:"policyGeneration,omitempty"`
	Decisions        []Decision `json:"decisions,omitempty"`
	Strategy         string     `json:"strategy,omitempty"`
	// DryRun is true for the record of what a dry run would do: nothing
	// in it happened.
	DryRun bool `json:"dryRun,omitempty"`
	// Start is when the cluster was deleted; End when the operator let it
	// go (for a dry run, when the record was written).
	Start metav1.Time  `json:"start"`
	End   *metav1.Time `json:"end,omitempty"`
	// Outcome is the reason of the teardown's end (Completed, Forced,
	// Orphaned, Released), and Message what it says.
	Outcome string `json:"outcome,omitempty"`
	Message string `json:"message,omitempty"`
	// Resumed says that the record began after the teardown had begun (the
	// record was deleted meanwhile, or the teardown began under an operator
	// that kept none): it lacks what was done before.
	Resumed bool    `json:"resumed,omitempty"`
	Signal  *Signal `json:"signal,omitempty"`
	Holds   []Hold  `json:"holds,omitempty"`
	Entries []Entry `json:"entries"`
	// Summary, when set, says that the entries did not fit in one
	// ConfigMap: the first ones are kept, the rest counted.
	Summary *Summary `json:"summary,omitempty"`
}

// Decision names a policy generation that decided the teardown from a time on.
type Decision struct {
	Policy     string      `json:"policy"`
	Generation int64       `json:"generation"`
	From       metav1.Time `json:"from"`
}

// Signal is the outcome of the deletion signal.
type Signal struct {
	// Work is the deletion-signal ManifestWork; empty when the policy has
	// no deletion signal.
	Work    string `json:"work,omitempty"`
	Outcome string `json:"outcome"`
}

// Signal outcomes.
const (
	SignalNone     = "none"     // the policy has no deletion signal
	SignalAbsent   = "absent"   // no signal work existed to delete
	SignalWaiting  = "waiting"  // deleted; the work agent has not removed it yet
	SignalRemoved  = "removed"  // deleted, and removed by the work agent
	SignalForced   = "forced"   // the work agent's finalizer was removed from it
	SignalOrphaned = "orphaned" // Needless: left on the managed cluster with everything else
	SignalHeld     = "held"     // a work of its name is not the operator's
	SignalPending  = "pending"  // the teardown has not reached the signal yet
)

// Hold is one time the teardown held: why, and from when until when.
type Hold struct {
	Reason string       `json:"reason"`
	Start  metav1.Time  `json:"start"`
	End    *metav1.Time `json:"end,omitempty"`
}

// Duration is how long the hold lasted, up to now while it lasts.
func (h Hold) Duration(now time.Time) time.Duration {
	if h.End != nil {
		return h.End.Sub(h.Start.Time)
	}
	return now.Sub(h.Start.Time)
}

// Entry is one object the teardown acted on, or means to act on next.
type Entry struct {
	// Step is the teardown step: orphaning, signal, stage/<name>,
	// namespace, finish.
	Step   string `json:"step"`
	Action Action `json:"action"`
	State  State  `json:"state"`
	// Resource is resource.group, as kubectl names it.
	Resource  string    `json:"resource"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
	// Priority is the cleanup-priority of the group of a stage the object
	// was acted on in: within a step, groups are acted on one after the
	// other, lowest priority first, and listed in that order.
	Priority string `json:"priority,omitempty"`
	// DeleteOption is the deleteOption an orphaning wrote, or a deleted
	// work carried when it orphans manifests.
	DeleteOption string `json:"deleteOption,omitempty"`
	// Finalizers are the finalizers a force removed.
	Finalizers []string `json:"finalizers,omitempty"`
	// Note says more: why an object is kept, that an entry was resolved
	// after a restart.
	Note string `json:"note,omitempty"`
	// Time is when the entry was written, and, once done, when it was done.
	Time metav1.Time `json:"time"`
}

// Action is what the teardown did to an object.
type Action string

// Actions of entries.
const (
	Deleted    Action = "deleted"
	Orphaned   Action = "orphaned"
	Stamped    Action = "stamped" // a deleteOption that orphans nothing
	Forced     Action = "forced"
	Kept       Action = "kept"
	Labelled   Action = "labelled"
	Unlabelled Action = "unlabelled"
)

// State is where an entry stands.
type State string

// States of an entry: intended before the write, done after it; would in
// a dry run.
const (
	Intended State = "intended"
	Done     State = "done"
	Would    State = "would"
	// NotDone is an entry still intended when the teardown ended: its
	// object remains as it was (the plan changed before the write).
	NotDone State = "not-done"
)

// Abandon marks the entries still intended NotDone, at the end.
func (r *Record) Abandon() {
	for i := range r.Entries {
		if r.Entries[i].State == Intended {
			r.Entries[i].State = NotDone
			r.Entries[i].Note = "intended, then no longer planned; the object was left as it was"
		}
	}
}

// Summary counts what a record too large for one ConfigMap left out.
type Summary struct {
	// Entries is the count of all entries, Kept of those listed.
	Entries int `json:"entries"`
	Kept    int `json:"kept"`
	// Omitted counts the entries left out, by step and action
	// ("stage/works deleted": 1200).
	Omitted map[string]int `json:"omitted"`
}

// key identifies an entry: one action on one object.
type key struct {
	action Action
	uid    types.UID
	name   string
}

func (e *Entry) key() key {
	k := key{action: e.Action, uid: e.UID}
	if e.UID == "" {
		k.name = e.Resource + "/" + e.Namespace + "/" + e.Name
	}
	return k
}

// Add appends the entries that the record does not hold yet (one action on
// one object is listed once), and returns how many it appended.
func (r *Record) Add(entries ...Entry) int {
	have := make(map[key]bool, len(r.Entries))
	for i := range r.Entries {
		have[r.Entries[i].key()] = true
	}
	n := 0
	for _, e := range entries {
		if have[e.key()] {
			continue
		}
		have[e.key()] = true
		r.Entries = append(r.Entries, e)
		n++
	}
	return n
}

// Resolve marks done, at t, the intended entries for which done is true,
// and returns how many it marked.
func (r *Record) Resolve(t time.Time, note string, done func(*Entry) bool) int {
	n := 0
	for i := range r.Entries {
		e := &r.Entries[i]
		if e.State == Intended && done(e) {
			e.State, e.Time = Done, metav1.NewTime(t)
			if note != "" {
				e.Note = note
			}
			n++
		}
	}
	return n
}

// Destructive says whether an entry's write changes what the cluster had:
// a delete, a deleteOption written, a force. A label, an unlabel and a
// keep do not; their entries may reach the record after the write.
func (e *Entry) Destructive() bool {
	switch e.Action {
	case Labelled, Unlabelled, Kept:
		return false
	}
	return true
}

// Intended counts the entries still intended.
func (r *Record) Intended() int {
	n := 0
	for i := range r.Entries {
		if r.Entries[i].State == Intended {
			n++
		}
	}
	return n
}

// OpenHold is the hold that lasts, if any.
func (r *Record) OpenHold() *Hold {
	if n := len(r.Holds); n > 0 && r.Holds[n-1].End == nil {
		return &r.Holds[n-1]
	}
	return nil
}

// SetHold opens a hold for reason at t, closing the one that lasts if its
// reason differs; an empty reason closes the one that lasts. It says
// whether the record changed.
func (r *Record) SetHold(reason string, t time.Time) bool {
	open := r.OpenHold()
	if open != nil && open.Reason == reason {
		return false
	}
	changed := false
	if open != nil {
		end := metav1.NewTime(t)
		open.End, changed = &end, true
	}
	if reason != "" {
		r.Holds = append(r.Holds, Hold{Reason: reason, Start: metav1.NewTime(t)})
		changed = true
	}
	return changed
}

// Decided notes the policy and generation that decide from t on; it says
// whether the record changed.
func (r *Record) Decided(policy string, generation int64, t time.Time) bool {
	if policy == r.Policy && generation == r.PolicyGeneration {
		return false
	}
	if r.Policy != "" || len(r.Decisions) > 0 {
		if len(r.Decisions) == 0 {
			r.Decisions = append(r.Decisions, Decision{Policy: r.Policy, Generation: r.PolicyGeneration, From: r.Start})
		}
		r.Decisions = append(r.Decisions, Decision{Policy: policy, Generation: generation, From: metav1.NewTime(t)})
	}
	r.Policy, r.PolicyGeneration = policy, generation
	return true
}

// Deletes are the entries of objects deleted, in the order they were
// listed.
func (r *Record) Deletes() []Entry {
	var out []Entry
	for _, e := range r.Entries {
		if e.Action == Deleted {
			out = append(out, e)
		}
	}
	return out
}

// Counts counts the entries by action.
func (r *Record) Counts() map[Action]int {
	out := map[Action]int{}
	for _, e := range r.Entries {
		out[e.Action]++
	}
	if r.Summary != nil {
		for k, n := range r.Summary.Omitted {
			for _, a := range []Action{Deleted, Orphaned, Stamped, Forced, Kept, Labelled, Unlabelled} {
				if len(k) > len(a) && k[len(k)-len(a):] == string(a) {
					out[a] += n
				}
			}
		}
	}
	return out
}

// Begun says whether the record is of a teardown that began: one that
// meant a destructive write (its entries), ended, or was found begun
// (Resumed). A record that notes only holds before the first write (a
// broken policy, a failed read) is not: the blast radius does not count
// it.
func (r *Record) Begun() bool {
	return !r.DryRun && (r.Resumed || r.End != nil || r.Summary != nil ||
		slices.ContainsFunc(r.Entries, func(e Entry) bool { return e.Destructive() }))
}

// Finished says whether the teardown the record describes has ended.
func (r *Record) Finished() bool { return r.End != nil }

// SortNewestFirst orders records by start, the newest first, then by name.
func SortNewestFirst(rs []Record) {
	slices.SortStableFunc(rs, func(a, b Record) int {
		if c := b.Start.Compare(a.Start.Time); c != 0 {
			return c
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
}

func typesUID(s string) types.UID { return types.UID(s) }
