package teardown

import (
	"cmp"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

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
