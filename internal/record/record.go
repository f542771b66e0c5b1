package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
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

// Labels and annotations of a record's ConfigMap.
const (
	// RecordLabel marks a ConfigMap as a teardown record.
	RecordLabel = "cleanup.fleetops.dev/teardown-record"
	// ClusterLabel and ClusterUIDLabel name the cluster torn down.
	ClusterLabel    = "cleanup.fleetops.dev/cluster"
	ClusterUIDLabel = "cleanup.fleetops.dev/cluster-uid"
	// DryRunLabel marks the record of a dry run.
	DryRunLabel = "cleanup.fleetops.dev/dry-run"
	// FingerprintAnnotation is the fingerprint of a dry run's plan, so
	// that a record is written once per change of plan.
	FingerprintAnnotation = "cleanup.fleetops.dev/plan-fingerprint"
	// EndAnnotation is when the teardown ended (RFC 3339), for retention
	// to read without decoding the record.
	EndAnnotation = "cleanup.fleetops.dev/ended"
	// StartAnnotation is when the teardown's cluster was deleted (RFC
	// 3339) and PolicyAnnotation the policy that governs it, for the
	// blast radius to count teardowns begun without decoding the record.
	StartAnnotation  = "cleanup.fleetops.dev/started"
	PolicyAnnotation = "cleanup.fleetops.dev/policy"
	// NotBegunAnnotation marks the record of a teardown that has not
	// begun (Record.Begun): the blast radius does not count it.
	NotBegunAnnotation = "cleanup.fleetops.dev/not-begun"
)

// MetaAnnotations are the annotations of a record that its readers of
// metadata alone (the blast radius, the retention, a review's snapshot)
// read.
var MetaAnnotations = []string{StartAnnotation, PolicyAnnotation, EndAnnotation, NotBegunAnnotation}

// Keys of a record's ConfigMap: the record as JSON in data, or, above
// CompressAbove bytes, gzipped in binaryData.
const (
	JSONKey = "record.json"
	GzipKey = "record.json.gz"
)

const (
	// CompressAbove is the size of the JSON above which it is gzipped.
	CompressAbove = 32 << 10
	// MaxPayload bounds what a record stores: well under the 1 MiB the
	// API server accepts in a ConfigMap, leaving room for its metadata.
	MaxPayload = 900 << 10
	// MaxJSON bounds the JSON of a record Encode writes, however well
	// it compresses: the most compressible records reach 36 times
	// MaxPayload otherwise (TestDecodeBound).
	MaxJSON = 16 << 20
	// MaxDecoded bounds the JSON a record's gzip may decode to, twice
	// what Encode writes: a ConfigMap that decodes to more is refused
	// before it costs the manager more memory (its pod is limited to
	// 512 MiB).
	MaxDecoded = 2 * MaxJSON
)

// DefaultNamespace is the namespace config/default installs the operator in.
const DefaultNamespace = "cleanup-operator-system"

// Namespace is the operator's namespace: flag if set, else POD_NAMESPACE,
// else DefaultNamespace. The operator and the plugin find records alike.
func Namespace(flag string) string {
	if flag != "" {
		return flag
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// Name is the name of the record of a teardown: the cluster's name and
// the start of its UID, so that a cluster recreated under the same name
// gets a record of its own; -dryrun for a dry run's.
func Name(cluster string, uid types.UID, dryRun bool) string {
	short := strings.ReplaceAll(string(uid), "-", "")
	if len(short) > 8 {
		short = short[:8]
	}
	// A ConfigMap name is at most 253 characters.
	if len(cluster) > 200 {
		cluster = cluster[:200]
	}
	name := "teardown-" + strings.TrimSuffix(cluster, ".") + "-" + short
	if dryRun {
		name += "-dryrun"
	}
	return name
}

// Labels are the labels of a record's ConfigMap.
func Labels(r *Record) map[string]string {
	l := map[string]string{
		v1alpha1.ManagedByLabel: v1alpha1.ManagedBy,
		RecordLabel:             "true",
		ClusterLabel:            labelValue(r.Cluster),
		ClusterUIDLabel:         labelValue(string(r.UID)),
	}
	if r.DryRun {
		l[DryRunLabel] = "true"
	}
	return l
}

// labelValue bounds a value to the 63 characters a label value allows.
func labelValue(v string) string {
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-_.")
	}
	return v
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

// IsRecord says whether the ConfigMap is a record the operator wrote.
func IsRecord(cm metav1.Object) bool {
	l := cm.GetLabels()
	return l[RecordLabel] == "true" && l[v1alpha1.ManagedByLabel] == v1alpha1.ManagedBy
}

// Ended is when the record's teardown ended, from its annotation.
func Ended(cm metav1.Object) (metav1.Time, bool) {
	v := cm.GetAnnotations()[EndAnnotation]
	if v == "" {
		return metav1.Time{}, false
	}
	var t metav1.Time
	if err := t.UnmarshalQueryParameter(v); err != nil {
		return metav1.Time{}, false
	}
	return t, true
}

// Size is the size of the stored payload of a ConfigMap, for reports.
func Size(cm *corev1.ConfigMap) int {
	return len(cm.BinaryData[GzipKey]) + len(cm.Data[JSONKey])
}
