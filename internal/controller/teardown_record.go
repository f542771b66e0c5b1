package controller

import (
	"context"
	"slices"
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
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// The teardown record (internal/record) is written as the teardown goes:
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

// RecordOptions say where teardown records are kept and for how long.
type RecordOptions struct {
	// Namespace is the operator's namespace (record.Namespace).
	Namespace string
	// Retention bounds the ended records kept.
	Retention record.Retention
}

// recorder writes the records of the teardowns this process runs; each
// teardown's state (teardownState) keeps its record as last written. Only
// the cluster's own reconcile touches that record: one at a time.
type recorder struct {
	client client.Client
	reader client.Reader // live: a record is read once per process and cluster
	opts   RecordOptions
}

// openRecord is a record as last written, or read, by this process; rec is
// nil when the teardown has none yet.
type openRecord struct {
	rec *record.Record
	cm  *corev1.ConfigMap
}

func newRecorder(c client.Client, reader client.Reader, opts RecordOptions) *recorder {
	return &recorder{client: c, reader: reader, opts: opts}
}

// get returns the record of the cluster's teardown as this process knows
// it, reading it once; create makes a new one when there is none.
func (r *recorder) get(ctx context.Context, st *teardownState, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, create bool) (*openRecord, error) {
	o := st.record
	if o == nil {
		rec, cm, err := record.Load(ctx, r.reader, r.opts.Namespace, record.Name(mc.GetName(), mc.GetUID(), false))
		if err != nil {
			return nil, err
		}
		o = &openRecord{rec: rec, cm: cm}
		if rec != nil {
			// Written by an earlier process: what it intended and did
			// since is read from the world, its label included (a label
			// is not announced alone: stopped right after one, it wrote
			// no entry for it).
			rec.Resolve(s.Now, "resolved after a restart", doneIn(s))
			if err := r.noteLabel(ctx, rec, mc, s, "labelled before a restart"); err != nil {
				return nil, err
			}
		}
		st.record = o
	}
	if o.rec == nil && create {
		rec := &record.Record{Name: record.Name(mc.GetName(), mc.GetUID(), false), Cluster: mc.GetName(), UID: mc.GetUID(),
			Strategy: string(plan.Strategy), Entries: []record.Entry{}}
		if ts := mc.GetDeletionTimestamp(); ts != nil {
			rec.Start = *ts
		} else {
			rec.Start = metav1.NewTime(s.Now)
		}
		if beginRecord(rec, mc, s) {
			if err := r.noteLabel(ctx, rec, mc, s, "labelled before the record began"); err != nil {
				return nil, err
			}
		}
		o.rec = rec
		// Pre-cleanup hooks or the blast radius held the teardown until
		// now: nothing, the record included, is written while they hold.
		if c := decision.ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition); c != nil &&
			c.Status == metav1.ConditionUnknown && slices.Contains(heldBeforeFirstWrite, c.Reason) {
			end := metav1.NewTime(s.Now)
			o.rec.Holds = append(o.rec.Holds, record.Hold{Reason: c.Message, Start: o.rec.Start, End: &end})
		}
	}
	return o, nil
}

// save writes the record. A record deleted meanwhile is written again from
// memory; any other failure forgets it, so that the next attempt reads it.
func (r *recorder) save(ctx context.Context, st *teardownState, o *openRecord) error {
	cm, err := record.Save(ctx, r.client, r.opts.Namespace, o.rec, o.cm)
	if o.cm != nil && apierrors.IsNotFound(err) {
		cm, err = record.Save(ctx, r.client, r.opts.Namespace, o.rec, nil)
	}
	if err != nil {
		st.record = nil
		return err
	}
	o.cm = cm
	return nil
}

// update applies what every write of a record carries: the policy and
// generation deciding, the signal's outcome, the end of a hold that ended.
func update(rec *record.Record, plan *decision.Plan, s *decision.Snapshot, hold string) bool {
	changed := false
	if plan.Policy != "" {
		changed = rec.Decided(plan.Policy, plan.PolicyGeneration, s.Now) || changed
		if rec.Strategy != string(plan.Strategy) && plan.Strategy != "" {
			rec.Strategy, changed = string(plan.Strategy), true
		}
	}
	if sig := record.SignalOf(plan, rec); sig != nil && (rec.Signal == nil || *sig != *rec.Signal) {
		rec.Signal, changed = sig, true
	}
	return rec.SetHold(hold, s.Now) || changed
}

// intend writes the entries of the writes the executor is about to make,
// as intended, before it makes them. Entries already in the record are not
// listed again.
func (r *recorder) intend(ctx context.Context, st *teardownState, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, acts []decision.Action) error {
	step := plan.Next()
	entries := record.Entries(plan, step, acts, s.Now)
	if len(entries) == 0 {
		return nil
	}
	destructive := slices.ContainsFunc(entries, func(e record.Entry) bool { return e.Destructive() })
	o, err := r.get(ctx, st, mc, plan, s, true)
	if err != nil {
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
	return r.save(ctx, st, o)
}

// done marks, in memory, the entries of the actions made.
func (r *recorder) done(st *teardownState, plan *decision.Plan, acts []decision.Action, made func(decision.Action) bool) {
	o := st.record
	if o == nil || o.rec == nil {
		return
	}
	step := plan.Next()
	now := time.Now()
	keys := map[[2]string]bool{}
	for _, act := range acts {
		if e, ok := record.EntryOf(plan, step, act, record.Done, now); ok && made(act) {
			keys[[2]string{string(e.Action), string(e.UID) + "/" + e.Resource + "/" + e.Namespace + "/" + e.Name}] = true
		}
	}
	o.rec.Resolve(now, "", func(e *record.Entry) bool {
		return keys[[2]string{string(e.Action), string(e.UID) + "/" + e.Resource + "/" + e.Namespace + "/" + e.Name}]
	})
}

// hold notes why the teardown holds, or that a hold ended (why empty): a
// write when that changes what the record says.
func (r *recorder) hold(ctx context.Context, st *teardownState, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, why string) error {
	// Pre-cleanup hooks hold a teardown before its first write: they
	// begin no record; the first write notes how long they held. A
	// deletion out of order begins it at once.
	hooks := plan.Next() != nil && (plan.Next().Kind == decision.StepHooks || plan.Next().Kind == decision.StepBlastRadius) &&
		len(plan.OutOfOrder) == 0
	o, err := r.get(ctx, st, mc, plan, s, why != "" && !hooks)
	if err != nil || o.rec == nil {
		return err
	}
	noted := o.rec.NoteAgent(record.AgentNotes(plan))
	if open := o.rec.OpenHold(); !noted && (open == nil && why == "" || open != nil && open.Reason == why) {
		// No hold begun or ended, no note: nothing to write; a record
		// not written yet (a label alone) waits for its first
		// destructive write.
		return nil
	}
	o.rec.Resolve(s.Now, "", doneIn(s))
	update(o.rec, plan, s, why)
	return r.save(ctx, st, o)
}

// finish writes the end of the teardown, before the finalizer goes, and
// applies the retention to the cluster's records.
func (r *recorder) finish(ctx context.Context, st *teardownState, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot, rep *decision.Report) error {
	o, err := r.get(ctx, st, mc, plan, s, true)
	if err != nil {
		return err
	}
	rec := o.rec
	if rec.End != nil && o.cm != nil {
		return nil // ended already; the finalizer's removal is retried
	}
	rec.Resolve(s.Now, "", doneIn(s))
	rec.Abandon()
	rec.Add(record.KeptEntries(plan, s.Now)...)
	update(rec, plan, s, "")
	end := metav1.NewTime(s.Now)
	rec.End, rec.Outcome, rec.Message = &end, rep.Reason, rep.Message
	if rec.Outcome == "" {
		rec.Outcome = rep.Event // a release: no condition, an event
	}
	if err := r.save(ctx, st, o); err != nil {
		return err
	}
	r.prune(ctx, mc.GetName())
	return nil
}

// prune applies the retention to the records of a cluster. A failure is
// logged: the next teardown's end, or the sweep, prunes again.
func (r *recorder) prune(ctx context.Context, cluster string) {
	pruned, err := record.Prune(ctx, r.client, r.opts.Namespace, cluster, r.opts.Retention, time.Now())
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
func (r *recorder) dryRun(ctx context.Context, st *teardownState, mc *unstructured.Unstructured, plan *decision.Plan, s *decision.Snapshot) error {
	start := s.Now
	if ts := mc.GetDeletionTimestamp(); ts != nil {
		start = ts.Time
	}
	rec := record.DryRun(plan, string(mc.GetUID()), start, s.Now)
	fp := record.Fingerprint(rec)
	if st.dryRun == fp {
		return nil
	}
	cm := &corev1.ConfigMap{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: rec.Name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return err
	case !record.IsRecord(cm):
		_, _, err := record.Load(ctx, r.reader, r.opts.Namespace, rec.Name) // says why
		return err
	case cm.Annotations[record.FingerprintAnnotation] == fp:
		st.dryRun = fp
		return nil
	}
	if cm == nil {
		cm = &corev1.ConfigMap{}
		cm.Annotations = map[string]string{record.FingerprintAnnotation: fp}
		cm.Namespace = r.opts.Namespace
		if err := record.Encode(rec, cm); err != nil {
			return err
		}
		if err := r.client.Create(ctx, cm); err != nil {
			return err
		}
	} else {
		cm.Annotations[record.FingerprintAnnotation] = fp
		if _, err := record.Save(ctx, r.client, r.opts.Namespace, rec, cm); err != nil {
			return err
		}
	}
	st.dryRun = fp
	r.prune(ctx, mc.GetName())
	return nil
}

// doneIn says whether the world of the snapshot shows an intended entry's
// write made: the object gone or being deleted, forced, stamped, labelled
// or unlabelled as intended.
func doneIn(s *decision.Snapshot) func(*record.Entry) bool {
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
	return func(e *record.Entry) bool {
		m := metas[e.UID]
		if m == nil {
			return true // gone
		}
		switch e.Action {
		case record.Deleted:
			return m.DeletionTimestamp != nil
		case record.Forced:
			return !slices.ContainsFunc(e.Finalizers, func(f string) bool { return slices.Contains(m.Finalizers, f) })
		case record.Orphaned, record.Stamped:
			w := s.Works[e.UID]
			return w == nil || w.DeletionTimestamp != nil || record.OptionOf(decision.CurrentDeleteOption(w)) == e.DeleteOption
		case record.Labelled:
			return m.Labels[v1alpha1.ClusterDeletingLabel] == "true" || m.DeletionTimestamp != nil
		case record.Unlabelled, record.Kept:
			_, labelled := m.Labels[v1alpha1.ClusterDeletingLabel]
			return !labelled
		}
		return false
	}
}

// heldBeforeFirstWrite are the reasons of the holds before a teardown's
// first write that its record notes once it begins.
var heldBeforeFirstWrite = []string{v1alpha1.WaitingForHooksReason, v1alpha1.BlastRadiusExceededReason, v1alpha1.WaitingForTurnReason}
