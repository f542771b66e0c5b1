package teardown

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/stamp"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The teardown of a deleted cluster decides, then acts: the reader gathers
// a snapshot, decision.PlanTeardown turns it into a plan, and the executor
// below makes the writes of the plan's next step (Plan.Now), and nothing
// else, then reports once. Each reconcile plans again from what exists, so
// a restart resumes the teardown without repeating or skipping a step.

// reconcileDeletion runs one step of the teardown of a deleted cluster.
func (a *ClusterTeardown) reconcileDeletion(ctx context.Context, mc *unstructured.Unstructured, g *decision.Governed) (reconcile.Result, error) {
	if a.Teardowns.isFinished(mc.GetUID()) {
		return reconcile.Result{}, nil // finished; the cache has not caught up yet
	}
	st := a.Teardowns.of(mc.GetName(), mc.GetUID())
	// Every write on the cluster in this reconcile goes through one helper,
	// made from the cluster as read.
	cluster := newClusterPatch(a.Client, mc)
	s, err := a.reader().Read(ctx, g, a.Teardowns.memory(mc.GetName(), mc.GetUID()))
	if err != nil {
		var accessErr *watch.AccessError
		if errors.As(err, &accessErr) {
			// Reported, and retried with backoff: a granted permission
			// brings no watch event.
			if _, rerr := a.report(ctx, st, cluster, nil, decision.HeldReport(err), "read"); rerr != nil {
				return reconcile.Result{}, rerr
			}
		}
		return reconcile.Result{}, err
	}
	plan := decision.PlanTeardown(g, s)
	if err := a.keepMark(ctx, s, plan); err != nil {
		return reconcile.Result{}, err
	}
	res, err := a.execute(ctx, st, cluster, s, plan)
	if err != nil {
		st.await(nil)
	} else {
		st.await(plan)
	}
	if next := plan.Next(); err == nil && plan.Suspended == "" && plan.Held == "" && !plan.DryRun &&
		(next == nil || next.Kind != decision.StepResumed) {
		// No resume to report. A hold or a dry run keeps it: the resume is
		// reported once they end, and the timeout counts from then, not
		// from before the pause. report forgets it once reported.
		st.resumeReported()
	}
	return res, err
}

// reader is the snapshot reader of the operator: through its cache, with
// the resources it lists watched from their first list, and the manifests
// of works from the API server when the policy's rules read them (the
// cache keeps their identity only).
func (a *ClusterTeardown) reader() *snapshot.Reader {
	return &snapshot.Reader{Client: a.Client, Lister: a.Resources, Mapper: a.Mapper, APIReader: a.APIReader, CompactManifests: true, Leases: true,
		NamespaceDeny: a.NamespaceDeny, BlastRadius: a.BlastRadius, RecordsNamespace: a.records.Namespace,
		Records: a.records.Client}
}

// execute makes the writes of the plan's next step, and reports once, at
// the end. A dry run, or a held plan, writes nothing and reports the plan.
// What the writes meet (a conflict on a stamp) may turn the report into a
// hold; it never adds a write the plan did not list.
func (a *ClusterTeardown) execute(ctx context.Context, st *teardownState, cluster *clusterPatch, s *decision.Snapshot, plan *decision.Plan) (res reconcile.Result, err error) {
	mc := cluster.mc
	if plan.Suspended != "" {
		// A suspended policy or a paused cluster: not a single write, not
		// even the condition; the resume brings the cluster back.
		logf.FromContext(ctx).V(1).Info("teardown suspended", "cluster", mc.GetName(), "reason", plan.Suspended)
		return reconcile.Result{}, nil
	}
	a.trackNotOwned(plan, s)
	step := plan.Next()
	var report *decision.Report
	switch {
	case plan.Held != "":
		report = plan.HeldReport()
		if err := a.records.Hold(ctx, &st.record, mc, plan, s, plan.Held); err != nil {
			return a.recordFailed(ctx, st, cluster, err)
		}
	case plan.DryRun:
		report = plan.DryRunReport()
		if err := a.records.DryRun(ctx, &st.record, mc, plan, s); err != nil {
			return a.recordFailed(ctx, st, cluster, err)
		}
	case step == nil:
		return reconcile.Result{}, nil
	case step.Kind == decision.StepFinish:
		return a.finishStep(ctx, st, cluster, s, plan, step)
	default:
		report = step.Report
		ran, err := a.run(ctx, st, cluster, s, plan)
		switch {
		case ran.stop == stepStale:
			// Nothing after the refused label is written, nor reported.
			return reconcile.Result{}, nil
		case ran.stop == stepNoRecord:
			return a.recordFailed(ctx, st, cluster, err)
		case err != nil:
			return reconcile.Result{}, err
		}
		if len(ran.holds) > 0 {
			report = decision.OrphaningHeld(append(plannedHolds(step), ran.holds...))
		}
		if err := a.records.Hold(ctx, &st.record, mc, plan, s, record.HoldOf(plan, ran.holds)); err != nil {
			return a.recordFailed(ctx, st, cluster, err)
		}
	}
	if report == nil {
		return reconcile.Result{}, nil
	}
	observeRemaining(st, plan, step)
	return a.report(ctx, st, cluster, plan, report, stepKey(step))
}

// finishStep runs the last step. A refused unlabel keeps the finalizer
// until the namespace's event brings the cluster back.
func (a *ClusterTeardown) finishStep(ctx context.Context, st *teardownState, cluster *clusterPatch, s *decision.Snapshot, plan *decision.Plan, step *decision.Step) (reconcile.Result, error) {
	stop, err := a.finish(ctx, st, cluster, s, plan, step)
	switch stop {
	case stepStale:
		return reconcile.Result{}, nil
	case stepNoRecord:
		return a.recordFailed(ctx, st, cluster, err)
	}
	return reconcile.Result{}, err
}

// stepResult is what the writes of a step came to, besides an error: the
// stamps that turned into holds (another manager owns the field, or the
// write failed), and why the writes stopped short.
type stepResult struct {
	holds []string
	stop  stepStop
}

// stepStop is why a step's writes stopped short, other than an error.
type stepStop int

const (
	// stepOn: no reason; every write was made, or an error says why not.
	stepOn stepStop = iota
	// stepStale: a label or unlabel was refused on its preconditions (the
	// namespace changed since the plan read it). Nothing after it in the
	// plan is written this reconcile; the namespace's event brings the
	// cluster back.
	stepStale
	// stepNoRecord: the teardown record could not be written (the error
	// says why); nothing it would list is written either.
	stepNoRecord
)

// stepKey names a step for the pacing of its progress: its kind and name
// (a stage's); a report of another reason is another step too.
func stepKey(step *decision.Step) string {
	if step == nil {
		return ""
	}
	return string(step.Kind) + "/" + step.Name
}

// observeRemaining keeps the metric of the objects the cluster's current
// step still acts on or waits for current, whatever the condition shows.
func observeRemaining(st *teardownState, plan *decision.Plan, step *decision.Step) {
	if step == nil || plan.DryRun {
		return
	}
	st.observeRemaining(stepKey(step), stepObjects(step).Len())
}

// stepObjects are the objects a step acts on or waits for, which the
// metric of what remains counts.
func stepObjects(step *decision.Step) sets.Set[types.UID] {
	objects := sets.New[types.UID]()
	for _, act := range step.Actions {
		if act.UID != "" && act.Namespace != "" {
			objects.Insert(act.UID)
		}
	}
	return objects
}

// plannedHolds are the reasons of the holds a step planned.
func plannedHolds(step *decision.Step) []string {
	var out []string
	for _, act := range step.Actions {
		if act.Verb == decision.VerbHold {
			out = append(out, act.For)
		}
	}
	return out
}

// run makes the writes of the plan's next step, by verb: labels, stamps
// and records before deletes, deletes before forcing. It returns what the
// writes came to: a refused label or unlabel stops the step before any
// other write, a record not written before any write.
func (a *ClusterTeardown) run(ctx context.Context, st *teardownState, cluster *clusterPatch, s *decision.Snapshot, plan *decision.Plan) (stepResult, error) {
	mc, now := cluster.mc, plan.Now()
	// The record first: the entries of the writes below, as intended.
	if err := a.records.Intend(ctx, &st.record, mc, plan, s, now); err != nil {
		return stepResult{stop: stepNoRecord}, err
	}
	byVerb := map[decision.Verb][]decision.Action{}
	for _, act := range now {
		byVerb[act.Verb] = append(byVerb[act.Verb], act)
	}
	labels := append(byVerb[decision.VerbLabel], byVerb[decision.VerbUnlabel]...)
	for _, act := range labels {
		written, err := a.label(ctx, st, act)
		if err != nil {
			return stepResult{}, err
		}
		if !written {
			return stepResult{stop: stepStale}, nil
		}
	}
	a.records.Done(&st.record, plan, labels, func(decision.Action) bool { return true })
	stamped, holds := a.stampAll(ctx, s, byVerb[decision.VerbStamp])
	for uid, generation := range stamped {
		st.stamp(uid, generation)
	}
	a.records.Done(&st.record, plan, byVerb[decision.VerbStamp], func(act decision.Action) bool { _, ok := stamped[act.UID]; return ok })
	if acts := byVerb[decision.VerbRecordUnconfirmed]; len(acts) > 0 {
		st.note()
		if err := a.recordUnconfirmed(ctx, cluster, plan, acts[0]); err != nil {
			return stepResult{}, err
		}
	}
	deleted, err := a.deleteAll(ctx, mc, plan, byVerb[decision.VerbDelete])
	st.deletedAll(deleted)
	a.records.Done(&st.record, plan, byVerb[decision.VerbDelete], func(act decision.Action) bool { return deleted.Has(act.UID) })
	if err != nil {
		return stepResult{}, err
	}
	// An object forced right after its delete only if the delete went
	// through: never the finalizer of an object that is not being deleted.
	var force []decision.Action
	for _, act := range byVerb[decision.VerbForce] {
		if act.Meta.DeletionTimestamp != nil || deleted.Has(act.UID) {
			force = append(force, act)
		}
	}
	if len(force) > 0 {
		st.note()
	}
	forced, err := a.force(ctx, cluster, plan, force)
	st.forcedAll(forced)
	a.records.Done(&st.record, plan, force, func(act decision.Action) bool { return forced.Has(act.UID) })
	return stepResult{holds: holds}, err
}

// recordFailed reports a record that could not be written as a hold, and
// retries with backoff: the teardown waits for its record, and nothing the
// record would list is written either.
func (a *ClusterTeardown) recordFailed(ctx context.Context, st *teardownState, cluster *clusterPatch, err error) (reconcile.Result, error) {
	err = fmt.Errorf("the teardown record could not be written; nothing is deleted until it is: %w", err)
	if apierrors.IsConflict(err) {
		// Someone else changed the record meanwhile: it is read again
		// and the write retried, without a report.
		return reconcile.Result{}, err
	}
	if _, rerr := a.report(ctx, st, cluster, nil, decision.HeldReport(err), "record"); rerr != nil {
		return reconcile.Result{}, rerr
	}
	return reconcile.Result{}, err
}

// finish reports the outcome, then makes the last step's writes, in this
// order: the outcome (the condition, flushed before the finalizer goes),
// the record ended, the namespace unlabelled, and the finalizer last (a
// refused unlabel, stepStale, keeps it).
//
// A cluster whose only finalizer is the operator's is gone with its
// removal, and no one reads the status of a cluster that is gone: its
// outcome is told by the Event and the record, and the condition is not
// written. Its removal then requires the finalizer to be still the only
// one: a finalizer added meanwhile is a retry that writes the outcome.
// Not after this process wrote the notes the outcome is read from (the
// forced count, unconfirmed orphans): the outcome's write then checks
// that the cache shows them, as on any other cluster.
func (a *ClusterTeardown) finish(ctx context.Context, st *teardownState, cluster *clusterPatch, s *decision.Snapshot, plan *decision.Plan, step *decision.Step) (stepStop, error) {
	mc, r := cluster.mc, step.Report
	last := lastFinalizer(mc, plan.Now()) && !st.wroteNotes()
	if r.Reason != "" && !last {
		if err := a.writeOutcome(ctx, cluster, r); err != nil {
			return stepOn, err
		}
	}
	// The record ends before the finalizer goes: a cluster gone is a
	// record ended.
	if err := a.records.Finish(ctx, &st.record, mc, plan, s, r); err != nil {
		return stepNoRecord, err
	}
	if plan.Policy == "" {
		tally.ClearNotOwnedWorks(a.Tally, mc.GetName())
	}
	for _, act := range plan.Now() {
		switch act.Verb {
		case decision.VerbUnlabel:
			written, err := a.label(ctx, st, act)
			if err != nil {
				return stepOn, err
			}
			if !written {
				return stepStale, nil
			}
		case decision.VerbRemoveFinalizer:
			if err := a.removeFinalizer(ctx, cluster, act, r, last); err != nil {
				return stepOn, err
			}
		}
	}
	return stepOn, nil
}

// lastFinalizer says whether the finalizer the actions remove is the
// cluster's only one: its removal deletes the cluster.
func lastFinalizer(mc *unstructured.Unstructured, acts []decision.Action) bool {
	for _, act := range acts {
		if act.Verb == decision.VerbRemoveFinalizer {
			return slices.Equal(mc.GetFinalizers(), []string{act.Finalizer})
		}
	}
	return false
}

// stampAll gives each work the deleteOption the plan stamps, and returns
// the generation each stamped work now has. A stamp that meets another
// manager's deleteOption, or fails, is returned as a hold; a work replaced
// or changed meanwhile is left to its event.
func (a *ClusterTeardown) stampAll(ctx context.Context, s *decision.Snapshot, acts []decision.Action) (map[types.UID]int64, []string) {
	var holds []string
	stamped := map[types.UID]int64{}
	for _, act := range acts {
		w := s.Works[act.UID]
		if w == nil {
			continue
		}
		want := *act.Option
		result, why, err := stamp.DeleteOption(ctx, a.Client, a.APIReader, a.Metrics, &w.ObjectMeta, want)
		switch {
		case err == nil && result.Written():
			stamped[w.UID] = int64(result)
		case err != nil:
			holds = append(holds, fmt.Sprintf("%s: setting spec.deleteOption %s failed: %v", actionKey(act), want.Describe(), err))
		case result == stamp.Conflict:
			holds = append(holds, fmt.Sprintf("%s: another manager owns spec.deleteOption (%s: %s); the policy requires %s",
				actionKey(act), decision.CurrentDeleteOption(w).Describe(), why, want.Describe()))
		}
	}
	return stamped, holds
}

// What a teardown reports of each step: an Event when the step has one
// (a wait on others, a warning, the outcome), and its ContentDeleteSuccess
// condition on the cluster, paced.

// report emits the step's event, if any, and writes ContentDeleteSuccess
// when it changed: at once for the teardown's first step, a hold, a
// failure or a resume, and while the teardown runs at most once per
// progress interval (the requeue at its end writes what was held back).
// It requeues when the step waits for a time. plan is the plan the report
// comes from, nil when none could be made.
func (a *ClusterTeardown) report(ctx context.Context, st *teardownState, cluster *clusterPatch, plan *decision.Plan, r *decision.Report, step string) (reconcile.Result, error) {
	mc := cluster.mc
	// A resume is reported once, whatever reason shows it (the budget's,
	// when it holds the teardown): the next reconcile goes on.
	resumed := r.Reason == v1alpha1.ResumedReason
	r = decision.Reported(mc, plan, r, time.Now())
	// The event first: the step it reports has happened even if the
	// condition write below meets a newer cluster and has to wait.
	if r.Event != "" && !(r.Pending && conditionIs(mc, metav1.ConditionUnknown, r.Reason, r.Message)) {
		// A waiting report (hooks) is announced when its condition is
		// written, not on each reconcile while it waits.
		typ := corev1.EventTypeNormal
		if r.Event == v1alpha1.CleanupFailedReason || r.Event == v1alpha1.BlastRadiusExceededReason || r.Event == v1alpha1.DeletedOutOfOrderReason {
			typ = corev1.EventTypeWarning
		}
		a.Recorder.Eventf(mc, nil, typ, r.Event, eventAction(cmp.Or(r.Action, "Cleanup")), "%s", r.Message)
	}
	held, err := a.writeProgress(ctx, st, cluster, r, step)
	if err != nil {
		if apierrors.IsConflict(err) {
			// Another writer (OCM's registration controllers) changed the
			// cluster meanwhile; its event brings the cluster back.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if resumed {
		st.resumeReported()
	}
	a.Teardowns.reported(st, mc, plan, r)
	requeue := max(r.Requeue.Duration, 0)
	if held > 0 && (requeue == 0 || held < requeue) {
		requeue = held
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// writeProgress writes ContentDeleteSuccess when it changed, unless a
// running teardown only moved on (to another step, or in the same one)
// within the progress interval of the last write: then it returns how long
// the write waits. A teardown whose steps follow one another within one
// interval writes its first step and its outcome; a hold, a failure or a
// resume is written at once.
func (a *ClusterTeardown) writeProgress(ctx context.Context, st *teardownState, cluster *clusterPatch, r *decision.Report, step string) (time.Duration, error) {
	mc, key, runs := cluster.mc, r.Reason+"/"+step, running(r)
	prev := decision.ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition)
	if !r.Done {
		var held time.Duration
		switch {
		case runs && st.progress != nil && st.progress.running:
			// What this process wrote last, not the cache, which may
			// not show that write yet.
			held = a.progress.wait(st.progress)
		case prev != nil && prev.Reason == r.Reason && (prev.Status == metav1.ConditionFalse || heldAgain(prev, r)):
			held = a.progress.hold(st.progress, key)
		}
		if held > 0 {
			if setContentDeleteCondition(mc.DeepCopy(), metav1.ConditionFalse, r.Reason, r.Message) {
				return held, nil
			}
			return 0, nil
		}
	}
	written, err := a.writeCondition(ctx, cluster, r)
	if err == nil && written {
		st.progress = a.progress.mark(key, runs)
	}
	return 0, err
}

// running says whether a report shows a teardown under way: not waiting to
// begin, held, failed, resumed, a dry run or ended.
func running(r *decision.Report) bool {
	return reportStatus(r) == metav1.ConditionFalse && r.Reason != v1alpha1.CleanupFailedReason &&
		r.Reason != v1alpha1.ResumedReason && r.Reason != v1alpha1.DryRunReason
}

// heldAgain says whether the report holds the teardown before it begins as
// the condition already does (its blast radius, its turn, a hold, a dry
// run), and differs at most in its message (the clusters counted): while a
// storm is paced, every teardown that ends would otherwise rewrite the
// condition of every one waiting its turn.
func heldAgain(prev *metav1.Condition, r *decision.Report) bool {
	return r.Pending && prev.Status == metav1.ConditionUnknown && r.Reason != v1alpha1.WaitingForHooksReason &&
		r.Reason != v1alpha1.ResumedReason
}

// writeCondition sets ContentDeleteSuccess as the report says, and
// flushes it at the end of the step when it changed, on the cluster as
// read: a cluster changed meanwhile is a conflict. It says whether it
// wrote.
func (a *ClusterTeardown) writeCondition(ctx context.Context, cluster *clusterPatch, r *decision.Report) (written bool, err error) {
	if !cluster.setCondition(reportStatus(r), r.Reason, r.Message) {
		return false, nil
	}
	done, err := cluster.flushReport(ctx)
	if err != nil {
		return false, err
	}
	logStep(ctx, cluster.mc, r)
	return done.status, nil
}

// writeOutcome sets ContentDeleteSuccess to the outcome and flushes it
// before the finalizer goes: a conflict is an error, retried, as the
// outcome must be on the cluster before it can go.
func (a *ClusterTeardown) writeOutcome(ctx context.Context, cluster *clusterPatch, r *decision.Report) error {
	changed := cluster.setCondition(reportStatus(r), r.Reason, r.Message)
	done, err := cluster.flushBeforeFinalizer(ctx)
	if err == nil && changed && done.status {
		logStep(ctx, cluster.mc, r)
	}
	return err
}

// reportStatus is the status of ContentDeleteSuccess a report sets.
func reportStatus(r *decision.Report) metav1.ConditionStatus {
	switch {
	case r.Done:
		return metav1.ConditionTrue
	case r.Pending:
		return metav1.ConditionUnknown
	}
	return metav1.ConditionFalse
}

// logStep logs a step whose condition was written.
func logStep(ctx context.Context, mc *unstructured.Unstructured, r *decision.Report) {
	logf.FromContext(ctx).Info("cluster cleanup step", "cluster", mc.GetName(), "reason", r.Reason, "message", r.Message)
}

// eventAction bounds an event action to the 128 characters the API accepts.
func eventAction(a string) string {
	if len(a) > 128 {
		return a[:128]
	}
	return a
}

// conditionIs says whether the cluster's ContentDeleteSuccess already has
// this status, reason and message.
func conditionIs(mc *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) bool {
	c := decision.ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition)
	return c != nil && c.Status == status && c.Reason == reason && c.Message == message
}
