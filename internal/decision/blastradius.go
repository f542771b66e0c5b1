package decision

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Fleet is what the blast-radius budget of a policy reads of the hub, all
// from the API server's state (never from what a process remembers), so
// that every replica and every restart decides alike.
type Fleet struct {
	// Governed is how many ManagedClusters the policy governs that OCM
	// accepted: the base of a percentage maxTeardowns.
	Governed int
	// Deleting are the ManagedClusters being deleted under the operator's
	// finalizer whose governing-policy annotation names the policy, the
	// cluster planned included.
	Deleting []*unstructured.Unstructured
	// Begun are the teardowns of the policy's clusters their records say
	// began (the record is written before a teardown's first write), the
	// clusters torn down and gone included: those deleted within the
	// window, and those of the clusters still being deleted.
	Begun []Started
	// Default is the operator-wide budget: each field the policy leaves
	// unset is taken from it.
	Default v1alpha1.BlastRadius
}

// Recorded says whether a record says the teardown of the cluster of uid
// began (a destructive write was meant): false for a nil fleet.
func (f *Fleet) Recorded(uid types.UID) bool {
	return f != nil && slices.ContainsFunc(f.Begun, func(s Started) bool { return s.UID == uid })
}

// recorded are the UIDs of the clusters whose records say their teardowns
// began, for the budget's loops over every deleting cluster.
func (f *Fleet) recorded() map[types.UID]bool {
	out := make(map[types.UID]bool, len(f.Begun))
	for _, r := range f.Begun {
		out[r.UID] = true
	}
	return out
}

// Started is a teardown begun, as its record says: the cluster, and when it
// was deleted.
type Started struct {
	Cluster string
	UID     types.UID
	Start   time.Time
}

// Budget is the blast radius a policy's teardowns are held to.
type Budget struct {
	// MaxTeardowns is how many teardowns may begin within Window; -1: no bound.
	MaxTeardowns int
	// Share is the percentage MaxTeardowns was computed from; "" for a count.
	Share  string
	Window time.Duration
	// MaxConcurrent is how many may be in progress at once; 0: no bound.
	MaxConcurrent int
	AfterWindow   v1alpha1.AfterWindow
}

// String names the budget as the condition and the plan show it.
func (b Budget) String() string {
	var parts []string
	if b.MaxTeardowns >= 0 {
		n := strconv.Itoa(b.MaxTeardowns)
		if b.Share != "" {
			n += " (" + b.Share + " of the governed clusters)"
		}
		parts = append(parts, fmt.Sprintf("maxTeardowns %s within %s", n, b.Window))
	}
	if b.MaxConcurrent > 0 {
		parts = append(parts, fmt.Sprintf("maxConcurrent %d", b.MaxConcurrent))
	}
	return strings.Join(parts, ", ")
}

// ReleaseClockSkew is how far in the future a release's time may be and
// still count, as for a deletion confirmation.
const ReleaseClockSkew = ConfirmationClockSkew

// Released says whether the cluster carries a release of its held teardown
// that counts at now: "<count>/<time>", count a positive number, time in
// RFC 3339, written after the cluster's deletion (a release never reaches a
// deletion that came after it) and not in the future. why says why a
// release the cluster carries does not count.
func Released(mc *unstructured.Unstructured, now time.Time) (ok bool, why string) {
	v, has := mc.GetAnnotations()[v1alpha1.BlastRadiusReleasedAnnotation]
	if !has {
		return false, ""
	}
	count, at, found := strings.Cut(v, "/")
	n, err := strconv.Atoi(count)
	if !found || err != nil || n < 1 {
		return false, fmt.Sprintf("%s is %q, not <count>/<time>", v1alpha1.BlastRadiusReleasedAnnotation, v)
	}
	t, err := time.Parse(time.RFC3339, at)
	ts := mc.GetDeletionTimestamp()
	switch {
	case err != nil:
		return false, fmt.Sprintf("%s is %q: its time is not RFC 3339", v1alpha1.BlastRadiusReleasedAnnotation, v)
	case t.After(now.Add(ReleaseClockSkew)):
		return false, fmt.Sprintf("%s is %q, in the future", v1alpha1.BlastRadiusReleasedAnnotation, v)
	case ts == nil || t.Before(ts.Time.Truncate(time.Second)):
		return false, fmt.Sprintf("%s is %q, written before the cluster's deletion", v1alpha1.BlastRadiusReleasedAnnotation, v)
	}
	return true, ""
}

// releaseWake is how long until a release the cluster carries, written
// by a clock ahead of this one, stops being in the future; 0 when it
// carries none such. Its time brings no event, so the plan requeues at it.
func releaseWake(mc *unstructured.Unstructured, now time.Time) time.Duration {
	v := mc.GetAnnotations()[v1alpha1.BlastRadiusReleasedAnnotation]
	_, at, found := strings.Cut(v, "/")
	t, err := time.Parse(time.RFC3339, at)
	if !found || err != nil {
		return 0
	}
	return max(t.Add(-ReleaseClockSkew).Sub(now), 0)
}

// counted says whether a deleting cluster counts against the budget at
// now: its deletion within the window; or its teardown begun within it (a
// burst the operator met late); or not begun and not held yet (a deletion
// nobody counted). A teardown held past its window counts no more: it
// stays held until released.
func (b Budget) counted(deleted time.Time, t Turn, now time.Time) bool {
	since := now.Add(-b.Window)
	if deleted.After(since) {
		return true
	}
	if !t.Begun {
		return !t.Held
	}
	return time.Unix(0, t.Since).After(since)
}

// verdict is what the budget says of one teardown not begun.
type verdict struct {
	reason, message string
	requeue         time.Duration
}

// budgetVerdict decides whether the budget holds the teardown of mc, a
// deleted cluster whose teardown has not begun: nil when it may begin.
func budgetVerdict(policy string, b Budget, f *Fleet, mc *unstructured.Unstructured, now time.Time) *verdict {
	released, _ := Released(mc, now)
	if b.MaxTeardowns >= 0 && !released {
		if v := b.exceeded(policy, f, mc, now); v != nil {
			v.requeue = earliest(v.requeue, releaseWake(mc, now))
			return v
		}
	}
	if b.MaxConcurrent <= 0 {
		return nil
	}
	// Each cluster's condition and deletion read once: a paced storm plans
	// every waiting teardown against all the others.
	recorded := f.recorded()
	running, pending := 0, []Started{}
	for _, c := range f.Deleting {
		t := TurnOf(c)
		switch {
		case t.InProgress(), recorded[c.GetUID()] && t.Status != metav1.ConditionTrue && c.GetUID() != mc.GetUID():
			// Begun, by its condition or its record (paused mid-way, it
			// shows Resumed): in progress.
			running++
		case !t.Begun && !t.Held || c.GetUID() == mc.GetUID():
			pending = append(pending, Started{Cluster: c.GetName(), UID: c.GetUID(), Start: c.GetDeletionTimestamp().Time})
		}
	}
	slices.SortFunc(pending, func(a, b Started) int { return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Cluster, b.Cluster)) })
	turn := slices.IndexFunc(pending, func(c Started) bool { return c.UID == mc.GetUID() })
	if running+turn < b.MaxConcurrent {
		return nil
	}
	// The message names no count or cluster that changes as the others go:
	// a storm's waiting teardowns would rewrite their conditions as each
	// teardown ends (the order is the clusters' deletion order).
	return &verdict{reason: v1alpha1.WaitingForTurnReason, message: fmt.Sprintf(
		"waiting its turn under the blast radius of CleanupPolicy %s (%s): the teardowns begin in the order the clusters were deleted, %d at a time; nothing is written until it begins",
		policy, b, b.MaxConcurrent)}
}

// A held teardown, or one waiting its turn, looks again on the events of
// the other clusters of its policy (a deletion starting, a teardown
// beginning, held or ending: what Turn says of it changing; the operator
// wakes it, teardown.ClusterTeardown.wakeHeld), and at the
// times no event tells: when a counted teardown leaves the window (its
// deletion, or its teardown's beginning, it was counted by), and when a
// release written by a clock ahead of this one comes to count.

// exceeded holds mc when it is beyond the first maxTeardowns of the
// teardowns counted, or when the budget held it before and its window
// passed (until released, or, afterWindow Proceed, until a window passes
// with no new deletion).
func (b Budget) exceeded(policy string, f *Fleet, mc *unstructured.Unstructured, now time.Time) *verdict {
	ranked, quiet, next := b.countedWithin(f, now)
	rank := slices.IndexFunc(ranked, func(c Started) bool { return c.UID == mc.GetUID() })
	switch {
	case rank >= 0 && rank < b.MaxTeardowns:
		return nil
	case rank < 0 && quiet && b.AfterWindow == v1alpha1.AfterWindowProceed:
		return nil
	}
	names := make([]string, 0, len(ranked))
	for _, c := range ranked {
		names = append(names, c.Cluster)
	}
	msg := fmt.Sprintf("held by the blast radius of CleanupPolicy %s (%s): %d teardown(s) of its clusters counted within the window: %s",
		policy, b, len(ranked), Bounded(names, ", "))
	if rank < 0 {
		msg = fmt.Sprintf("held by the blast radius of CleanupPolicy %s (%s) since a burst past it; its window passed and afterWindow is %s",
			policy, b, b.AfterWindow)
	}
	msg += fmt.Sprintf("; nothing is written or deleted until it is released: kubectl cleanup release --policy %s --clusters %s", policy, mc.GetName())
	return &verdict{reason: v1alpha1.BlastRadiusExceededReason, message: msg, requeue: next}
}

// countedWithin ranks the teardowns that count within the window: the
// begun ones first, then by start (to the second, as the API server keeps
// times) and by name, so every reconcile of every cluster ranks them
// alike. quiet says no deletion falls in the window; next is when the
// soonest counted teardown stops counting, 0 when none does.
func (b Budget) countedWithin(f *Fleet, now time.Time) (ranked []Started, quiet bool, next time.Duration) {
	window := map[types.UID]Started{}
	quiet = true
	// wake notes a time a counted teardown stops counting; note, a
	// deletion's, which also says the window is not quiet.
	wake := func(since time.Time) {
		if ends := since.Add(b.Window).Sub(now); ends > 0 {
			next = earliest(next, ends)
		}
	}
	note := func(start time.Time) {
		if start.Add(b.Window).After(now) {
			quiet = false
		}
		wake(start)
	}
	// begun teardowns hold their slots first: one not begun, deleted
	// earlier or sorting earlier, must not take a slot a begun one used.
	begun := f.recorded()
	for _, r := range f.Begun {
		if r.Start.After(now.Add(-b.Window)) {
			note(r.Start)
			window[r.UID] = r
		}
	}
	for _, c := range f.Deleting {
		deleted, t := c.GetDeletionTimestamp().Time, TurnOf(c)
		note(deleted)
		delete(window, c.GetUID())
		if b.counted(deleted, t, now) {
			window[c.GetUID()] = Started{Cluster: c.GetName(), UID: c.GetUID(), Start: deleted}
			// Its record may say it began before its condition does: the
			// record is written before the teardown's first write.
			begun[c.GetUID()] = begun[c.GetUID()] || t.Begun
			// One counted since its teardown began stops counting when
			// that time leaves the window.
			if t.Begun {
				wake(time.Unix(0, t.Since))
			}
		}
	}
	ranked = slices.SortedFunc(maps.Values(window), func(x, y Started) int {
		return cmp.Or(cmp.Compare(boolRank(begun[x.UID]), boolRank(begun[y.UID])),
			x.Start.Truncate(time.Second).Compare(y.Start.Truncate(time.Second)), cmp.Compare(x.Cluster, y.Cluster))
	})
	return ranked, quiet, next
}

// earliest is the sooner of two waits, 0 standing for none.
func earliest(a, b time.Duration) time.Duration {
	if a == 0 || b > 0 && b < a {
		return b
	}
	return a
}

// boolRank orders true before false.
func boolRank(v bool) int {
	if v {
		return 0
	}
	return 1
}

// blastRadius adds, while the policy's budget holds the teardown, the step
// that holds it before its first write: it writes nothing but the condition
// (Unknown: the cleanup has not started), with a Warning Event. A teardown
// begun, by its condition or its record, is never held; a snapshot without
// a fleet (no budget) has no such step.
func (t *teardown) blastRadius() bool {
	f := t.s.Fleet
	if f == nil || !t.plan.Deleting || t.plan.DryRun || t.plan.Begun {
		return true
	}
	b := BudgetOf(t.p.Spec.BlastRadius, f.Default, f.Governed)
	v := budgetVerdict(t.p.Name, b, f, t.s.Cluster, t.s.Now)
	if v == nil {
		return true
	}
	st := Step{Kind: StepBlastRadius, Actions: []Action{{Verb: VerbHold, Resource: ManagedClustersResource, Name: t.plan.Cluster, For: v.message}}}
	st.Report = &Report{Pending: true, Reason: v.reason, Message: v.message, Requeue: metav1.Duration{Duration: v.requeue}}
	if v.reason == v1alpha1.BlastRadiusExceededReason {
		st.Report.Event, st.Report.Action = v.reason, "BlastRadius"
	}
	t.plan.BlastRadius = v.message
	return t.add(st, false, false)
}
