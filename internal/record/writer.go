package record

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// The teardown record is written as the teardown goes:
// before the destructive writes of a group (deletes, deleteOptions,
// forces), its entries as intended; once they are made, the entries are
// marked done in memory, and that reaches the record with its next write
// (the next group's intents, a hold, the end). A crash between a write and
// its entry loses nothing: the entry was written first, and an intended
// entry whose object is gone (or being deleted, stamped, forced, labelled
// as intended) is resolved as done by the next write. A label or unlabel
// of the namespace is not announced alone: its entry rides with the
// record's next write, and a record begun after a crash that lost it reads
// the label from the namespace (get). The namespace's delete is announced
// by a write of its own, just before it: announced with an earlier group,
// a namespace someone else deleted meanwhile would be resolved as the
// operator's delete, and a record deleted meanwhile not written again
// before it. The record costs one write per group, one per hold begun or
// ended, and one at the end; a dry run's, one per change of plan.

// Writer writes the records of the teardowns one process runs. Each
// teardown keeps its Open and calls Intend before its destructive writes,
// Done after them, Hold when a hold begins or ends, Finish before its
// finalizer goes, and DryRun for a dry run's plan; the writer decides what
// the record says and when it is written.
type Writer struct {
	Client client.Client
	// Reader reads live: a record is read once per process and cluster.
	Reader client.Reader
	// Namespace is the operator's namespace (Namespace).
	Namespace string
	// Retention bounds the ended records kept.
	Retention Retention
}

// Open is one teardown's record as this process last wrote or read it.
// The zero value has read nothing yet. Only the cluster's own reconcile
// touches it: one at a time.
type Open struct {
	read bool
	// rec is nil while the teardown has no record.
	rec *Record
	cm  *corev1.ConfigMap
	// dryRun is the fingerprint of the dry-run record written.
	dryRun string
}

// get returns the record of the cluster's teardown as this process knows
// it, reading it once; create makes a new one when there is none.
func (w *Writer) get(ctx context.Context, o *Open, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, create bool) error {
	if !o.read {
		rec, cm, err := Load(ctx, w.Reader, w.Namespace, Name(mc.GetName(), mc.GetUID(), false))
		if err != nil {
			return err
		}
		if rec != nil {
			// Written by an earlier process: what it intended and did
			// since is read from the world, its label included (a label
			// is not announced alone: stopped right after one, it wrote
			// no entry for it).
			rec.Resolve(s.Now, "resolved after a restart", doneIn(s))
			if err := w.noteLabel(ctx, rec, mc, s, "labelled before a restart"); err != nil {
				return err
			}
		}
		o.read, o.rec, o.cm = true, rec, cm
	}
	if o.rec == nil && create {
		rec := &Record{Name: Name(mc.GetName(), mc.GetUID(), false), Cluster: mc.GetName(), UID: mc.GetUID(),
			Strategy: string(plan.Strategy), Entries: []Entry{}}
		if ts := mc.GetDeletionTimestamp(); ts != nil {
			rec.Start = *ts
		} else {
			rec.Start = metav1.NewTime(s.Now)
		}
		if beginRecord(rec, mc, s) {
			if err := w.noteLabel(ctx, rec, mc, s, "labelled before the record began"); err != nil {
				return err
			}
		}
		o.rec = rec
		// Pre-cleanup hooks or the blast radius held the teardown until
		// now: nothing, the record included, is written while they hold.
		if c := decision.ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition); c != nil &&
			c.Status == metav1.ConditionUnknown && slices.Contains(heldBeforeFirstWrite, c.Reason) {
			end := metav1.NewTime(s.Now)
			o.rec.Holds = append(o.rec.Holds, Hold{Reason: c.Message, Start: o.rec.Start, End: &end})
		}
	}
	return nil
}

// save writes the record. A record deleted meanwhile is written again from
// memory; any other failure forgets it, so that the next attempt reads it.
func (w *Writer) save(ctx context.Context, o *Open) error {
	cm, err := Save(ctx, w.Client, w.Namespace, o.rec, o.cm)
	if o.cm != nil && apierrors.IsNotFound(err) {
		cm, err = Save(ctx, w.Client, w.Namespace, o.rec, nil)
	}
	if err != nil {
		o.read, o.rec, o.cm = false, nil, nil
		return err
	}
	o.cm = cm
	return nil
}

// update applies what every write of a record carries: the policy and
// generation deciding, the signal's outcome, the end of a hold that ended.
func update(rec *Record, plan *decision.Plan, s *decision.Snapshot, hold string) bool {
	changed := false
	if plan.Policy != "" {
		changed = rec.Decided(plan.Policy, plan.PolicyGeneration, s.Now) || changed
		if rec.Strategy != string(plan.Strategy) && plan.Strategy != "" {
			rec.Strategy, changed = string(plan.Strategy), true
		}
	}
	if sig := SignalOf(plan, rec); sig != nil && (rec.Signal == nil || *sig != *rec.Signal) {
		rec.Signal, changed = sig, true
	}
	return rec.SetHold(hold, s.Now) || changed
}

// intend writes the entries of the writes the executor is about to make,
// as intended, before it makes them. Entries already in the record are not
// listed again.
func (w *Writer) Intend(ctx context.Context, o *Open, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, acts []decision.Action) error {
	step := plan.Next()
	entries := Entries(plan, step, acts, s.Now)
	if len(entries) == 0 {
		return nil
	}
	destructive := slices.ContainsFunc(entries, func(e Entry) bool { return e.Destructive() })
	if err := w.get(ctx, o, mc, plan, s, true); err != nil {
		return err
	}
	resolved := o.rec.Resolve(s.Now, "", doneIn(s))
	added := o.rec.Add(entries...)
	changed := update(o.rec, plan, s, "")
	switch {
	case !destructive:
		return nil // a label alone: it rides with the record's next write
	case added == 0 && resolved == 0 && !changed && o.cm != nil:
		return nil // intended already: a write retried
	}
	return w.save(ctx, o)
}

// done marks, in memory, the entries of the actions made.
func (w *Writer) Done(o *Open, plan *decision.Plan, acts []decision.Action, made func(decision.Action) bool) {
	if o.rec == nil {
		return
	}
	step := plan.Next()
	now := time.Now()
	keys := map[[2]string]bool{}
	for _, act := range acts {
		if e, ok := EntryOf(plan, step, act, Done, now); ok && made(act) {
			keys[[2]string{string(e.Action), string(e.UID) + "/" + e.Resource + "/" + e.Namespace + "/" + e.Name}] = true
		}
	}
	o.rec.Resolve(now, "", func(e *Entry) bool {
		return keys[[2]string{string(e.Action), string(e.UID) + "/" + e.Resource + "/" + e.Namespace + "/" + e.Name}]
	})
}

// hold notes why the teardown holds, or that a hold ended (why empty): a
// write when that changes what the record says.
func (w *Writer) Hold(ctx context.Context, o *Open, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, why string) error {
	// Pre-cleanup hooks hold a teardown before its first write: they
	// begin no record; the first write notes how long they held. A
	// deletion out of order begins it at once.
	hooks := plan.Next() != nil && (plan.Next().Kind == decision.StepHooks || plan.Next().Kind == decision.StepBlastRadius) &&
		len(plan.OutOfOrder) == 0
	if err := w.get(ctx, o, mc, plan, s, why != "" && !hooks); err != nil || o.rec == nil {
		return err
	}
	noted := o.rec.NoteAgent(AgentNotes(plan))
	if open := o.rec.OpenHold(); !noted && (open == nil && why == "" || open != nil && open.Reason == why) {
		// No hold begun or ended, no note: nothing to write; a record
		// not written yet (a label alone) waits for its first
		// destructive write.
		return nil
	}
	o.rec.Resolve(s.Now, "", doneIn(s))
	update(o.rec, plan, s, why)
	return w.save(ctx, o)
}

// finish writes the end of the teardown, before the finalizer goes, and
// applies the retention to the cluster's records.
func (w *Writer) Finish(ctx context.Context, o *Open, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, rep *decision.Report) error {
	if err := w.get(ctx, o, mc, plan, s, true); err != nil {
		return err
	}
	rec := o.rec
	if rec.End != nil && o.cm != nil {
		return nil // ended already; the finalizer's removal is retried
	}
	rec.Resolve(s.Now, "", doneIn(s))
	rec.Abandon()
	rec.Add(KeptEntries(plan, s.Now)...)
	update(rec, plan, s, "")
	end := metav1.NewTime(s.Now)
	rec.End, rec.Outcome, rec.Message = &end, rep.Reason, rep.Message
	if rec.Outcome == "" {
		rec.Outcome = rep.Event // a release: no condition, an event
	}
	if err := w.save(ctx, o); err != nil {
		return err
	}
	w.prune(ctx, mc.GetName())
	return nil
}

// prune applies the retention to the records of a cluster. A failure is
// logged: the next teardown's end, or the sweep, prunes again.
func (w *Writer) prune(ctx context.Context, cluster string) {
	pruned, err := Prune(ctx, w.Client, w.Namespace, cluster, w.Retention, time.Now())
	log := logf.FromContext(ctx)
	if err != nil {
		log.Error(err, "pruning teardown records", "cluster", cluster)
	}
	if len(pruned) > 0 {
		log.Info("teardown records pruned", "cluster", cluster, "records", pruned)
	}
}

// dryRun writes the record of what the dry run's plan would do, once per
// change of plan.
func (w *Writer) DryRun(ctx context.Context, o *Open, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot) error {
	start := s.Now
	if ts := mc.GetDeletionTimestamp(); ts != nil {
		start = ts.Time
	}
	rec := DryRun(plan, string(mc.GetUID()), start, s.Now)
	fp := Fingerprint(rec)
	if o.dryRun == fp {
		return nil
	}
	cm := &corev1.ConfigMap{}
	err := w.Reader.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: rec.Name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return err
	case !IsRecord(cm):
		_, _, err := Load(ctx, w.Reader, w.Namespace, rec.Name) // says why
		return err
	case cm.Annotations[FingerprintAnnotation] == fp:
		o.dryRun = fp
		return nil
	}
	if cm == nil {
		cm = &corev1.ConfigMap{}
		cm.Annotations = map[string]string{FingerprintAnnotation: fp}
		cm.Namespace = w.Namespace
		if err := Encode(rec, cm); err != nil {
			return err
		}
		if err := w.Client.Create(ctx, cm); err != nil {
			return err
		}
	} else {
		cm.Annotations[FingerprintAnnotation] = fp
		if _, err := Save(ctx, w.Client, w.Namespace, rec, cm); err != nil {
			return err
		}
	}
	o.dryRun = fp
	w.prune(ctx, mc.GetName())
	return nil
}

// doneIn says whether the world of the snapshot shows an intended entry's
// write made: the object gone or being deleted, forced, stamped, labelled
// or unlabelled as intended.
func doneIn(s *decision.Snapshot) func(*Entry) bool {
	metas := map[types.UID]*metav1.ObjectMeta{}
	for _, objs := range s.Objects {
		for _, o := range objs {
			metas[o.Meta.UID] = &o.Meta.ObjectMeta
		}
	}
	if s.Namespace != nil {
		metas[s.Namespace.UID] = &s.Namespace.ObjectMeta
	}
	for uid, w := range s.Works {
		metas[uid] = &w.ObjectMeta
	}
	return func(e *Entry) bool {
		m := metas[e.UID]
		if m == nil {
			return true // gone
		}
		switch e.Action {
		case Deleted:
			return m.DeletionTimestamp != nil
		case Forced:
			return !slices.ContainsFunc(e.Finalizers, func(f string) bool { return slices.Contains(m.Finalizers, f) })
		case Orphaned, Stamped:
			w := s.Works[e.UID]
			return w == nil || w.DeletionTimestamp != nil || OptionOf(decision.CurrentDeleteOption(w)) == e.DeleteOption
		case Labelled:
			return m.Labels[v1alpha1.ClusterDeletingLabel] == "true" || m.DeletionTimestamp != nil
		case Unlabelled, Kept:
			_, labelled := m.Labels[v1alpha1.ClusterDeletingLabel]
			return !labelled
		}
		return false
	}
}

// heldBeforeFirstWrite are the reasons of the holds before a teardown's
// first write that its record notes once it begins.
var heldBeforeFirstWrite = []string{v1alpha1.WaitingForHooksReason, v1alpha1.BlastRadiusExceededReason, v1alpha1.WaitingForTurnReason}

// beginRecordAfter are the reasons of ContentDeleteSuccess that a teardown
// reports after a delete, which its record precedes. Orphaning is not one:
// it may only wait for the agent to confirm works stamped while the
// cluster lived.
var beginRecordAfter = []string{v1alpha1.SignallingReason, v1alpha1.DeletingStageReason, v1alpha1.ResourcesRemainingReason}

// beginRecord notes what a new record's teardown did before it: a record
// begins with the first destructive write, so a namespace being deleted,
// or a condition only such a write is followed by, is a record lost (or a
// teardown begun by an operator that kept none): the record says it
// resumed. Else only the namespace's label may precede it (written, then a
// crash before the record): it returns true, and noteLabel lists it.
func beginRecord(rec *Record, mc *unstructured.Unstructured, s *decision.Snapshot) bool {
	ns := s.Namespace
	if ns == nil {
		return false
	}
	c := decision.ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition)
	if ns.DeletionTimestamp != nil || c != nil && c.Status == metav1.ConditionFalse && slices.Contains(beginRecordAfter, c.Reason) {
		rec.Resumed = true
		return false
	}
	return true
}

// noteLabel lists the cluster namespace's deleting label as done, with the
// note, when the namespace carries it, the record does not list it, and
// the operator wrote it: a label written by an earlier process just before
// it stopped (a label is not announced alone). The label is the operator's
// when its field manager owns it, read from the API server (the cache
// keeps no managedFields): one someone else wrote is not listed as the
// operator's, nor a namespace of another UID than the record names.
func (w *Writer) noteLabel(ctx context.Context, rec *Record, mc *unstructured.Unstructured, s *decision.Snapshot, note string) error {
	ns := s.Namespace
	if ns == nil || ns.Name != mc.GetName() || ns.Labels[v1alpha1.ClusterDeletingLabel] != "true" ||
		slices.ContainsFunc(rec.Entries, func(e Entry) bool {
			return e.Resource == decision.NamespacesResource && e.Name == ns.Name && (e.UID != ns.UID || e.Action == Labelled)
		}) {
		return nil
	}
	live := &corev1.Namespace{}
	switch err := w.Reader.Get(ctx, client.ObjectKey{Name: ns.Name}, live); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case live.UID != ns.UID || !ownsDeletingLabel(live.ManagedFields):
		return nil
	}
	rec.Add(Entry{Step: string(decision.StepSignal), Action: Labelled, State: Done,
		Resource: decision.NamespacesResource, Name: ns.Name, UID: ns.UID, Note: note, Time: metav1.NewTime(s.Now)})
	return nil
}

// ownsDeletingLabel says whether the operator's field manager owns the
// namespace's deleting label.
func ownsDeletingLabel(fields []metav1.ManagedFieldsEntry) bool {
	return slices.ContainsFunc(fields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == v1alpha1.FieldManager && f.FieldsV1 != nil &&
			decision.OwnsField(f.FieldsV1.Raw, "metadata", "labels", v1alpha1.ClusterDeletingLabel)
	})
}

// Started is a teardown a record says began: its cluster and when the
// cluster was deleted.
type Started struct {
	Cluster string
	UID     types.UID
	Start   time.Time
}

// StartedUnder lists, from the records' metadata alone, the teardowns of a
// policy's clusters begun since since (dry runs, which write nothing, and
// records of holds before the first write are not teardowns begun). A
// record written before it carried the policy and start annotations is not
// counted.
func StartedUnder(ctx context.Context, c client.Reader, namespace, policy string, since time.Time) ([]Started, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	sel := client.MatchingLabels{RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}
	if err := c.List(ctx, list, client.InNamespace(namespace), sel); err != nil {
		return nil, fmt.Errorf("listing the teardown records in %s: %w", namespace, err)
	}
	var out []Started
	for _, cm := range list.Items {
		if cm.Annotations[PolicyAnnotation] != policy || cm.Labels[DryRunLabel] == "true" || cm.Annotations[NotBegunAnnotation] == "true" {
			continue
		}
		start, err := time.Parse(time.RFC3339, cm.Annotations[StartAnnotation])
		if err != nil || !start.After(since) {
			continue
		}
		out = append(out, Started{Cluster: cm.Labels[ClusterLabel], UID: types.UID(cm.Labels[ClusterUIDLabel]), Start: start})
	}
	return out, nil
}

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

// Load reads the record of the given name; nil without error when there is
// none. A ConfigMap of that name that is not a record of the operator's is
// an error: it is neither changed nor taken for one.
func Load(ctx context.Context, c client.Reader, namespace, name string) (*Record, *corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading the teardown record %s/%s: %w", namespace, name, err)
	}
	if !IsRecord(cm) {
		return nil, nil, fmt.Errorf("ConfigMap %s/%s is not a teardown record of the operator's (labels %s=true, %s=%s): "+
			"it is left alone, and the teardown holds until it is renamed or removed", namespace, name, RecordLabel, v1alpha1.ManagedByLabel, v1alpha1.ManagedBy)
	}
	r, err := Decode(cm)
	if err != nil {
		return nil, nil, err
	}
	return r, cm, nil
}

// Save writes the record: a create when cm is nil, else an update of cm
// as last read or written, so that a record someone else changed
// meanwhile is a conflict, not overwritten. It returns the ConfigMap as
// written.
func Save(ctx context.Context, c client.Client, namespace string, r *Record, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	out := &corev1.ConfigMap{}
	if cm != nil {
		out = cm.DeepCopy()
	}
	out.Namespace = namespace
	if err := Encode(r, out); err != nil {
		return nil, err
	}
	var err error
	if cm == nil {
		err = c.Create(ctx, out)
	} else {
		err = c.Update(ctx, out)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the teardown record %s/%s: %w", namespace, r.Name, err)
	}
	return out, nil
}

// List reads the records of a cluster (all records when cluster is empty),
// the newest first.
func List(ctx context.Context, c client.Reader, namespace, cluster string) ([]Record, error) {
	cms, err := listConfigMaps(ctx, c, namespace, cluster)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(cms))
	for i := range cms {
		r, err := Decode(&cms[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	SortNewestFirst(out)
	return out, nil
}

func listConfigMaps(ctx context.Context, c client.Reader, namespace, cluster string) ([]corev1.ConfigMap, error) {
	sel := client.MatchingLabels{RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}
	if cluster != "" {
		sel[ClusterLabel] = labelValue(cluster)
	}
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), sel); err != nil {
		return nil, fmt.Errorf("listing the teardown records in %s: %w", namespace, err)
	}
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		if cluster == "" || cm.Labels[ClusterLabel] == labelValue(cluster) {
			out = append(out, cm)
		}
	}
	return out, nil
}

// Retention bounds the records kept: at most PerCluster ended records per
// cluster, none that ended longer than MaxAge ago. A record of a teardown
// in progress is always kept. Zero disables a bound.
type Retention struct {
	PerCluster int
	MaxAge     time.Duration
	// Window, when set, is the blast-radius window of a policy (0: none,
	// or no such policy). A record of a teardown its policy's window still
	// counts is kept past MaxAge: a window longer than MaxAge (a policy
	// admitted without the webhook, or stored before MaxAge was lowered)
	// would otherwise count fewer teardowns than began within it.
	Window func(ctx context.Context, policy string) (time.Duration, error)
}

// Prune deletes the ended records past the retention (of one cluster, or
// of all when cluster is empty) and returns their names. Each delete
// carries the record's UID: a record recreated meanwhile is not deleted.
//
// It reads metadata only (labels and the start, policy and end
// annotations): through the manager's cache, which keeps the hub's
// ConfigMaps as metadata.
func Prune(ctx context.Context, c client.Client, namespace, cluster string, keep Retention, now time.Time) ([]string, error) {
	sel := client.MatchingLabels{RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}
	if cluster != "" {
		sel[ClusterLabel] = labelValue(cluster)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, list, client.InNamespace(namespace), sel); err != nil {
		return nil, fmt.Errorf("listing the teardown records in %s: %w", namespace, err)
	}
	byCluster := map[string][]metav1.PartialObjectMetadata{}
	for _, cm := range list.Items {
		if _, ended := Ended(&cm); ended && IsRecord(&cm) && (cluster == "" || cm.Labels[ClusterLabel] == labelValue(cluster)) {
			byCluster[cm.Labels[ClusterLabel]] = append(byCluster[cm.Labels[ClusterLabel]], cm)
		}
	}
	counted := &windows{ctx: ctx, window: keep.Window, now: now, of: map[string]time.Duration{}}
	var pruned []string
	for _, ended := range byCluster {
		slices.SortStableFunc(ended, func(a, b metav1.PartialObjectMetadata) int {
			ta, _ := Ended(&a)
			tb, _ := Ended(&b)
			return tb.Compare(ta.Time)
		})
		for i, cm := range ended {
			end, _ := Ended(&cm)
			tooMany := keep.PerCluster > 0 && i >= keep.PerCluster
			tooOld := keep.MaxAge > 0 && now.Sub(end.Time) > keep.MaxAge
			if !tooMany && !tooOld {
				continue
			}
			if !tooMany && counted.counts(&cm) {
				continue
			}
			uid := cm.UID
			cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			if err := c.Delete(ctx, &cm, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return pruned, fmt.Errorf("deleting the teardown record %s/%s: %w", namespace, cm.Name, err)
			}
			pruned = append(pruned, cm.Name)
		}
	}
	slices.Sort(pruned)
	return pruned, counted.err
}

// windows reads the blast-radius windows of the policies records name,
// each once per Prune.
type windows struct {
	ctx    context.Context
	window func(context.Context, string) (time.Duration, error)
	now    time.Time
	of     map[string]time.Duration
	err    error // the first window that could not be read
}

// counts says whether a record's teardown is still counted by the window
// of the policy the record names: begun (its start annotation) within it.
// Dry runs are never counted, nor a record without a policy or a start. A
// window that cannot be read keeps the record, and Prune returns the error.
func (k *windows) counts(cm *metav1.PartialObjectMetadata) bool {
	policy := cm.Annotations[PolicyAnnotation]
	if k.window == nil || policy == "" || cm.Labels[DryRunLabel] == "true" {
		return false
	}
	start, err := time.Parse(time.RFC3339, cm.Annotations[StartAnnotation])
	if err != nil {
		return false
	}
	w, ok := k.of[policy]
	if !ok {
		if w, err = k.window(k.ctx, policy); err != nil {
			k.err = cmp.Or(k.err, fmt.Errorf("reading the blast-radius window of CleanupPolicy %s: %w", policy, err))
			return true
		}
		k.of[policy] = w
	}
	return w > 0 && start.After(k.now.Add(-w))
}
