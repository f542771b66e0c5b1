package decision

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Turn is what the blast radius reads of a deleted cluster when it decides
// the turns of the others: whether its teardown has begun, whether the
// budget holds it, and its condition's status and when that last changed
// (in progress or ended; counted within a window since). A teardown going
// from one step to the next changes none of it, so it wakes no teardown
// waiting its turn.
type Turn struct {
	Begun, Held bool
	Status      metav1.ConditionStatus
	Since       int64 // the condition's lastTransitionTime, in nanoseconds
}

// TurnOf is the Turn of a deleted cluster, from its ContentDeleteSuccess
// condition read once.
func TurnOf(mc *unstructured.Unstructured) Turn {
	c := ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition)
	if c == nil {
		return Turn{}
	}
	return Turn{
		// Begun: False or True, or Unknown with a reason other than a
		// hold before the first write.
		Begun:  c.Status != metav1.ConditionUnknown || !slices.Contains(notStarted, c.Reason),
		Held:   c.Status == metav1.ConditionUnknown && c.Reason == v1alpha1.BlastRadiusExceededReason,
		Status: c.Status,
		Since:  c.LastTransitionTime.UnixNano(),
	}
}

// InProgress says whether the teardown has begun and not finished.
func (t Turn) InProgress() bool { return t.Begun && t.Status != metav1.ConditionTrue }

// notStarted are the reasons of a ContentDeleteSuccess condition, status
// Unknown, written before the teardown's first write. A hold and a dry run
// are reported so too until the teardown begins (Reported).
var notStarted = []string{v1alpha1.WaitingForHooksReason, v1alpha1.ResumedReason,
	v1alpha1.BlastRadiusExceededReason, v1alpha1.WaitingForTurnReason,
	v1alpha1.CleanupFailedReason, v1alpha1.DryRunReason}

// Reported is r as the cluster's condition shows it. A teardown not begun
// whose report comes before its budget admitted it (plan nil or not
// admitted: a hold on a broken policy or a failed read, hooks, a resume, a
// dry run) is Pending, Unknown: nothing was written, and the budget must
// not take it for begun when the hold ends or the dry run is turned off.
// One its budget held stays held, whatever else holds or pauses it
// meanwhile: the report keeps the budget's reason, so that only a release
// (or afterWindow Proceed) ends that hold, never a hook added and removed,
// a pause, a policy broken for a while or a dry run.
func Reported(mc *unstructured.Unstructured, plan *Plan, r *Report, now time.Time) *Report {
	t := TurnOf(mc)
	// A plan knows the record too (under a budget); without one, the
	// condition says.
	if r.Done || plan.Admitted() || plan == nil && t.Begun || r.Reason == v1alpha1.BlastRadiusExceededReason || r.Reason == v1alpha1.WaitingForTurnReason {
		return r
	}
	out := *r
	out.Pending = true
	if released, _ := Released(mc, now); t.Held && !released {
		out.Reason = v1alpha1.BlastRadiusExceededReason
		out.Message += "; and held by its blast radius before this: kubectl cleanup release lets it go"
	}
	return &out
}

// Begun says whether the teardown of a deleted cluster has begun: its
// ContentDeleteSuccess condition says so (False or True, or Unknown with a
// reason other than a hold before the first write). A begun teardown is
// never held by the budget.
func Begun(mc *unstructured.Unstructured) bool { return TurnOf(mc).Begun }

// ReportBegun says whether a teardown whose report is r has begun, as
// Begun reads it back from the condition the report writes.
func ReportBegun(r *Report) bool {
	return r.Done || !r.Pending || !slices.Contains(notStarted, r.Reason)
}
