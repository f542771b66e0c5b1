package record

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
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

// Encode writes the record into cm: data, labels and the end annotation.
// A record whose JSON exceeds CompressAbove is gzipped; one whose gzip
// still exceeds MaxPayload keeps as many of its first entries as fit and
// counts the rest (Summary).
func Encode(r *Record, cm *corev1.ConfigMap) error {
	cm.Name = r.Name
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	for k, v := range Labels(r) {
		cm.Labels[k] = v
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	delete(cm.Annotations, EndAnnotation)
	delete(cm.Annotations, NotBegunAnnotation)
	if !r.DryRun && !r.Begun() {
		cm.Annotations[NotBegunAnnotation] = "true"
	}
	cm.Annotations[StartAnnotation] = r.Start.UTC().Format(time.RFC3339)
	if r.Policy != "" {
		cm.Annotations[PolicyAnnotation] = r.Policy
	}
	if r.End != nil {
		cm.Annotations[EndAnnotation] = r.End.UTC().Format("2006-01-02T15:04:05Z")
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	cm.Data, cm.BinaryData = nil, nil
	if len(raw) <= CompressAbove {
		cm.Data = map[string]string{JSONKey: string(raw)}
		return nil
	}
	gz, err := gzipped(raw)
	if err != nil {
		return err
	}
	if len(gz) > MaxPayload || len(raw) > MaxJSON {
		if gz, err = summarised(r, max(float64(len(gz))/MaxPayload, float64(len(raw))/MaxJSON)); err != nil {
			return err
		}
	}
	cm.BinaryData = map[string][]byte{GzipKey: gz}
	return nil
}

// summarised is the gzip of the record with as many of its first entries
// as fit in MaxPayload, and in MaxJSON once decoded, the rest counted.
// over is how many times too large all of them are: the first guess keeps
// that share of the entries, and each guess that does not fit keeps a
// twentieth fewer.
func summarised(r *Record, over float64) ([]byte, error) {
	k := int(float64(len(r.Entries)) / over * 0.97)
	for {
		k = max(min(k, len(r.Entries)), 0)
		raw := mustJSON(cut(r, k))
		gz, err := gzipped(raw)
		if err != nil {
			return nil, err
		}
		if len(gz) <= MaxPayload && len(raw) <= MaxJSON {
			return gz, nil
		}
		if k == 0 {
			return nil, fmt.Errorf("the record of %s does not fit in a ConfigMap even without its entries", r.Cluster)
		}
		k = k * 19 / 20
	}
}

// cut is the record with its first n entries, the rest counted.
func cut(r *Record, n int) *Record {
	c := *r
	c.Entries = r.Entries[:n]
	s := &Summary{Entries: len(r.Entries), Kept: n, Omitted: map[string]int{}}
	if r.Summary != nil {
		s.Entries += r.Summary.Entries - r.Summary.Kept
		for k, v := range r.Summary.Omitted {
			s.Omitted[k] += v
		}
	}
	for _, e := range r.Entries[n:] {
		s.Omitted[e.Step+" "+string(e.Action)]++
	}
	c.Summary = s
	return &c
}

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // a Record always marshals
	}
	return raw
}

func gzipped(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads the record a ConfigMap holds.
func Decode(cm *corev1.ConfigMap) (*Record, error) {
	var raw []byte
	switch {
	case cm.BinaryData[GzipKey] != nil:
		zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[GzipKey]))
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, GzipKey, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, MaxDecoded+1)); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, GzipKey, err)
		}
		if len(raw) > MaxDecoded {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s decodes to more than %d MiB, more than a record the operator writes: it is not read",
				cm.Namespace, cm.Name, GzipKey, MaxDecoded>>20)
		}
	case cm.Data[JSONKey] != "":
		raw = []byte(cm.Data[JSONKey])
	default:
		return nil, fmt.Errorf("ConfigMap %s/%s holds no record (%s or %s)", cm.Namespace, cm.Name, JSONKey, GzipKey)
	}
	r := &Record{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	r.Name = cm.Name
	return r, nil
}
