package decision_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// deleting is a cluster deleted at t, with its ContentDeleteSuccess
// reason (status Unknown for a hold before the first write: hooks, the
// blast radius, its turn, or a resume after a pause; False else);
// "" for none.
func deleting(name string, t time.Time, reason string) *unstructured.Unstructured {
	mc := &unstructured.Unstructured{Object: map[string]any{}}
	mc.SetName(name)
	mc.SetUID(types.UID("uid-" + name))
	ts := metav1.NewTime(t)
	mc.SetDeletionTimestamp(&ts)
	if reason != "" {
		status := "False"
		if reason == v1alpha1.BlastRadiusExceededReason || reason == v1alpha1.WaitingForTurnReason || reason == v1alpha1.WaitingForHooksReason ||
			reason == v1alpha1.ResumedReason {
			status = "Unknown"
		}
		_ = unstructured.SetNestedSlice(mc.Object, []any{map[string]any{"type": v1alpha1.ContentDeleteSuccessCondition,
			"status": status, "reason": reason, "message": "m", "lastTransitionTime": t.UTC().Format(time.RFC3339)}}, "status", "conditions")
	}
	return mc
}

func TestBudgetOfTakesEachUnsetFieldFromTheDefault(t *testing.T) {
	share := intstr.FromString("10%")
	two := int32(2)
	def := v1alpha1.BlastRadius{MaxTeardowns: &share, MaxConcurrent: &two}
	five := intstr.FromInt32(5)
	b := decision.BudgetOf(&v1alpha1.BlastRadius{MaxTeardowns: &five}, def, 100)
	if b.MaxTeardowns != 5 || b.MaxConcurrent != 2 || b.Window != time.Hour || b.AfterWindow != v1alpha1.AfterWindowHold {
		t.Fatalf("got %+v", b)
	}
	// A share rounds down: 10% of 19 is 1, of 5 is 0.
	if b := decision.BudgetOf(nil, def, 19); b.MaxTeardowns != 1 {
		t.Fatalf("10%% of 19: got %d", b.MaxTeardowns)
	}
	if b := decision.BudgetOf(nil, def, 5); b.MaxTeardowns != 0 {
		t.Fatalf("10%% of 5: got %d", b.MaxTeardowns)
	}
	if b := decision.BudgetOf(nil, v1alpha1.BlastRadius{}, 5); b.MaxTeardowns != -1 || b.MaxConcurrent != 0 {
		t.Fatalf("no budget: got %+v", b)
	}
}

func TestBudgetVerdict(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	b := decision.Budget{MaxTeardowns: 2, Window: time.Hour, AfterWindow: v1alpha1.AfterWindowHold}
	a := deleting("a", now.Add(-10*time.Minute), v1alpha1.ResourcesRemainingReason)
	c := deleting("c", now.Add(-5*time.Minute), "")
	d := deleting("d", now.Add(-5*time.Minute), "")
	gone := decision.Started{Cluster: "b", UID: "uid-b", Start: now.Add(-20 * time.Minute)}
	f := &decision.Fleet{Deleting: []*unstructured.Unstructured{d, c, a}, Begun: []decision.Started{gone}}
	for _, tc := range []struct {
		name string
		b    decision.Budget
		f    *decision.Fleet
		mc   *unstructured.Unstructured
		now  time.Time
		want string
	}{
		{"a gone teardown counts: c is third", b, f, c, now, v1alpha1.BlastRadiusExceededReason},
		{"without the gone one, c is second", b, &decision.Fleet{Deleting: f.Deleting}, c, now, ""},
		{"ties break by name", b, &decision.Fleet{Deleting: f.Deleting}, d, now, v1alpha1.BlastRadiusExceededReason},
		{"a budget raised lets it go", decision.Budget{MaxTeardowns: 3, Window: time.Hour}, f, c, now, ""},
		{"the gone one past the window counts no more", b, f, c, now.Add(41 * time.Minute), ""},
	} {
		if got := decision.BudgetVerdict("p", tc.b, tc.f, tc.mc, tc.now); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}

	// A teardown begun keeps its slot: a cluster deleted earlier whose
	// teardown had not begun (its policy suspended, or hooks holding it)
	// does not take the slot from it, nor does a later one that sorts
	// before it by name within the same second.
	one := decision.Budget{MaxTeardowns: 1, Window: time.Hour, AfterWindow: v1alpha1.AfterWindowHold}
	early := deleting("early", now.Add(-30*time.Minute), v1alpha1.WaitingForHooksReason)
	started := deleting("started", now.Add(-10*time.Minute), v1alpha1.ResourcesRemainingReason)
	if got := decision.BudgetVerdict("p", one, &decision.Fleet{Deleting: []*unstructured.Unstructured{early, started}}, early, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Errorf("an earlier deletion after a begun teardown took its slot: got %q", got)
	}
	zeta := deleting("zeta", now.Add(-time.Minute), v1alpha1.ResourcesRemainingReason)
	alpha := deleting("alpha", now.Add(-time.Minute), "")
	if got := decision.BudgetVerdict("p", one, &decision.Fleet{Deleting: []*unstructured.Unstructured{alpha, zeta}}, alpha, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Errorf("a same-second deletion sorting first took a begun teardown's slot: got %q", got)
	}

	// A teardown its record says began keeps its slot while its cluster's
	// condition does not show it yet (the record is written before the
	// teardown's first write, the condition after).
	lagging := deleting("started", now.Add(-10*time.Minute), "")
	recorded := decision.Started{Cluster: "started", UID: "uid-started", Start: now.Add(-10 * time.Minute)}
	if got := decision.BudgetVerdict("p", one, &decision.Fleet{Deleting: []*unstructured.Unstructured{early, lagging}, Begun: []decision.Started{recorded}}, early, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Errorf("an earlier deletion took the slot of a teardown begun by its record: got %q", got)
	}

	// So it does when both deletions are older than the window: the record
	// of a cluster still being deleted says its teardown began, however
	// long ago the cluster was deleted.
	earlier := deleting("early", now.Add(-3*time.Hour), v1alpha1.WaitingForHooksReason)
	old := deleting("started", now.Add(-2*time.Hour), "")
	oldRecord := decision.Started{Cluster: "started", UID: "uid-started", Start: now.Add(-2 * time.Hour)}
	if got := decision.BudgetVerdict("p", one, &decision.Fleet{Deleting: []*unstructured.Unstructured{earlier, old}, Begun: []decision.Started{oldRecord}}, earlier, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Errorf("past the window, an earlier deletion took the slot of a teardown begun by its record: got %q", got)
	}

	// A teardown paused mid-way shows Resumed, which reads as not begun:
	// its record keeps it ranked as begun, ahead of an earlier deletion
	// whose hooks held it, which would otherwise take its slot and hold it.
	resumed := deleting("started", now.Add(-10*time.Minute), v1alpha1.ResumedReason)
	paused := &decision.Fleet{Deleting: []*unstructured.Unstructured{early, resumed}, Begun: []decision.Started{recorded}}
	if got := decision.BudgetVerdict("p", one, paused, early, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Errorf("an earlier deletion took the slot of a resumed teardown begun by its record: got %q", got)
	}
	if got := decision.BudgetVerdict("p", one, paused, resumed, now); got != "" {
		t.Errorf("a resumed teardown begun by its record was held: got %q", got)
	}

	// Held, and its window passed: Hold keeps it, Proceed lets it go
	// once no deletion is within the window.
	held := deleting("h", now.Add(-2*time.Hour), v1alpha1.BlastRadiusExceededReason)
	quiet := &decision.Fleet{Deleting: []*unstructured.Unstructured{held}}
	if got := decision.BudgetVerdict("p", b, quiet, held, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Errorf("Hold past the window: got %q", got)
	}
	proceed := b
	proceed.AfterWindow = v1alpha1.AfterWindowProceed
	if got := decision.BudgetVerdict("p", proceed, quiet, held, now); got != "" {
		t.Errorf("Proceed past a quiet window: got %q", got)
	}
	busy := &decision.Fleet{Deleting: []*unstructured.Unstructured{held, deleting("n", now.Add(-time.Minute), v1alpha1.ResourcesRemainingReason)}}
	if got := decision.BudgetVerdict("p", proceed, busy, held, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Errorf("Proceed with a deletion within the window: got %q", got)
	}

	// maxConcurrent: one in progress, the next in line waits.
	pace := decision.Budget{MaxTeardowns: -1, Window: time.Hour, MaxConcurrent: 1}
	if got := decision.BudgetVerdict("p", pace, f, c, now); got != v1alpha1.WaitingForTurnReason {
		t.Errorf("maxConcurrent 1 with one in progress: got %q", got)
	}
	pace.MaxConcurrent = 2
	if got := decision.BudgetVerdict("p", pace, f, c, now); got != "" {
		t.Errorf("maxConcurrent 2, c first in line: got %q", got)
	}
	if got := decision.BudgetVerdict("p", pace, f, d, now); got != v1alpha1.WaitingForTurnReason {
		t.Errorf("maxConcurrent 2, d second in line: got %q", got)
	}
}

func TestReleased(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	mc := deleting("a", now.Add(-time.Hour), v1alpha1.BlastRadiusExceededReason)
	for value, want := range map[string]bool{
		"2/" + now.Add(-time.Minute).Format(time.RFC3339):   true,
		"2/" + now.Add(-2*time.Hour).Format(time.RFC3339):   false, // before the deletion
		"2/" + now.Add(10*time.Minute).Format(time.RFC3339): false, // in the future
		"0/" + now.Format(time.RFC3339):                     false,
		"2/yesterday":                                       false,
		now.Format(time.RFC3339):                            false,
	} {
		mc.SetAnnotations(map[string]string{v1alpha1.BlastRadiusReleasedAnnotation: value})
		if got, why := decision.Released(mc, now); got != want || !got && why == "" {
			t.Errorf("%q: got %v (%s), want %v", value, got, why, want)
		}
	}
}

// begunAt sets the time the cluster's teardown began: its condition's
// lastTransitionTime.
func begunAt(mc *unstructured.Unstructured, t time.Time) *unstructured.Unstructured {
	conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	conds[0].(map[string]any)["lastTransitionTime"] = t.UTC().Format(time.RFC3339)
	_ = unstructured.SetNestedSlice(mc.Object, conds, "status", "conditions")
	return mc
}

// A cluster counted since its teardown began late (hooks held it) stops
// counting when that time leaves the window, a time no event tells: the
// teardown it holds looks again then, not only when its own deletion
// leaves the window, by which time it would be held past its window.
func TestBudgetRequeuesWhenALateTeardownStopsCounting(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	one := decision.Budget{MaxTeardowns: 1, Window: time.Hour, AfterWindow: v1alpha1.AfterWindowHold}
	a := begunAt(deleting("a", t0, v1alpha1.ResourcesRemainingReason), t0.Add(30*time.Minute))
	b := deleting("b", t0.Add(45*time.Minute), v1alpha1.BlastRadiusExceededReason)
	f := &decision.Fleet{Deleting: []*unstructured.Unstructured{a, b}}
	now := t0.Add(time.Hour)
	if got := decision.BudgetVerdict("p", one, f, b, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Fatalf("at 01:00, a still counts since its teardown began: got %q", got)
	}
	if got, want := decision.BudgetRequeue("p", one, f, b, now), 30*time.Minute; got != want {
		t.Errorf("requeue at 01:00: got %s, want %s (when a stops counting)", got, want)
	}
	if got := decision.BudgetVerdict("p", one, f, b, t0.Add(90*time.Minute+time.Second)); got != "" {
		t.Errorf("at 01:30, a counts no more and b is first: got %q", got)
	}
}

// A release written by a clock ahead of this one does not count yet; the
// held teardown looks again when it does, which no event tells.
func TestBudgetRequeuesWhenAReleaseFromAheadCounts(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	one := decision.Budget{MaxTeardowns: 1, Window: time.Hour, AfterWindow: v1alpha1.AfterWindowHold}
	held := deleting("h", now.Add(-3*time.Hour), v1alpha1.BlastRadiusExceededReason)
	at := now.Add(10 * time.Minute)
	held.SetAnnotations(map[string]string{v1alpha1.BlastRadiusReleasedAnnotation: "1/" + at.Format(time.RFC3339)})
	f := &decision.Fleet{Deleting: []*unstructured.Unstructured{held}}
	if got := decision.BudgetVerdict("p", one, f, held, now); got != v1alpha1.BlastRadiusExceededReason {
		t.Fatalf("a release in the future: got %q", got)
	}
	if got, want := decision.BudgetRequeue("p", one, f, held, now), 10*time.Minute-decision.ReleaseClockSkew; got != want {
		t.Errorf("requeue: got %s, want %s", got, want)
	}
	if got := decision.BudgetVerdict("p", one, f, held, now.Add(10*time.Minute-decision.ReleaseClockSkew)); got != "" {
		t.Errorf("once the release counts: got %q", got)
	}
}

// withCondition gives a deleted cluster its ContentDeleteSuccess condition.
func withCondition(mc *unstructured.Unstructured, status metav1.ConditionStatus, reason string) *unstructured.Unstructured {
	_ = unstructured.SetNestedSlice(mc.Object, []any{map[string]any{"type": v1alpha1.ContentDeleteSuccessCondition,
		"status": string(status), "reason": reason, "message": "m",
		"lastTransitionTime": mc.GetDeletionTimestamp().UTC().Format(time.RFC3339)}}, "status", "conditions")
	return mc
}

// TestReportedBeforeTheBudget: a teardown not begun whose hold (a broken
// policy, a read that failed) or dry run is reported is not taken for
// begun when the hold ends or the dry run is turned off, and a teardown
// the budget held stays held through hooks, a pause, a hold or a dry run.
func TestReportedBeforeTheBudget(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	held := &decision.Plan{Held: "spec.removeStrategy.rules[0].when: no such key: tier"}
	dryRun := &decision.Plan{DryRun: true}
	hooks := &decision.Plan{Steps: []decision.Step{{Kind: decision.StepHooks, State: decision.StateNext}}}
	admitted := &decision.Plan{Steps: []decision.Step{{Kind: decision.StepStage, State: decision.StateNext}}}
	hookReport := &decision.Report{Pending: true, Reason: v1alpha1.WaitingForHooksReason, Message: "waiting for 1 pre-cleanup hook(s)"}
	for _, tc := range []struct {
		name       string
		mc         *unstructured.Unstructured
		plan       *decision.Plan
		r          *decision.Report
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{"a held plan, not begun", deleting("a", now, ""), held, held.HeldReport(), metav1.ConditionUnknown, v1alpha1.CleanupFailedReason},
		{"a failed read, not begun", deleting("a", now, ""), nil, decision.HeldReport(errors.New("forbidden")), metav1.ConditionUnknown, v1alpha1.CleanupFailedReason},
		{"a dry run, not begun", deleting("a", now, ""), dryRun, dryRun.DryRunReport(), metav1.ConditionUnknown, v1alpha1.DryRunReason},
		{"a held plan, begun", deleting("a", now, v1alpha1.DeletingStageReason), &decision.Plan{Held: held.Held, Begun: true}, held.HeldReport(), metav1.ConditionFalse, v1alpha1.CleanupFailedReason},
		{"a dry run, begun", deleting("a", now, v1alpha1.DeletingStageReason), &decision.Plan{DryRun: true, Begun: true}, dryRun.DryRunReport(), metav1.ConditionFalse, v1alpha1.DryRunReason},
		{"a failed read, begun", deleting("a", now, v1alpha1.DeletingStageReason), nil, decision.HeldReport(errors.New("forbidden")), metav1.ConditionFalse, v1alpha1.CleanupFailedReason},
		{"a step the budget admitted holds", deleting("a", now, ""), admitted, held.HeldReport(), metav1.ConditionFalse, v1alpha1.CleanupFailedReason},
		{"hooks, not held", deleting("a", now, ""), hooks, hookReport, metav1.ConditionUnknown, v1alpha1.WaitingForHooksReason},
		{"hooks, held by the budget", deleting("a", now, v1alpha1.BlastRadiusExceededReason), hooks, hookReport, metav1.ConditionUnknown, v1alpha1.BlastRadiusExceededReason},
		{"a held plan, held by the budget", deleting("a", now, v1alpha1.BlastRadiusExceededReason), held, held.HeldReport(), metav1.ConditionUnknown, v1alpha1.BlastRadiusExceededReason},
		{"a dry run, held by the budget", deleting("a", now, v1alpha1.BlastRadiusExceededReason), dryRun, dryRun.DryRunReport(), metav1.ConditionUnknown, v1alpha1.BlastRadiusExceededReason},
		{"a resume, held by the budget", deleting("a", now, v1alpha1.BlastRadiusExceededReason), nil,
			&decision.Report{Pending: true, Reason: v1alpha1.ResumedReason, Message: "resumes"}, metav1.ConditionUnknown, v1alpha1.BlastRadiusExceededReason},
	} {
		got := decision.Reported(tc.mc, tc.plan, tc.r, now)
		status := metav1.ConditionFalse
		if got.Pending {
			status = metav1.ConditionUnknown
		}
		if status != tc.wantStatus || got.Reason != tc.wantReason {
			t.Errorf("%s: reported %s/%s, want %s/%s", tc.name, status, got.Reason, tc.wantStatus, tc.wantReason)
		}
		if got.Reason != tc.r.Reason && !strings.Contains(got.Message, tc.r.Message) {
			t.Errorf("%s: the message %q lost what holds it: %q", tc.name, got.Message, tc.r.Message)
		}
		// What the report writes reads back as not begun unless it was.
		if written := withCondition(deleting("a", now, ""), status, got.Reason); decision.Begun(written) != decision.Begun(tc.mc) && tc.plan != admitted {
			t.Errorf("%s: the condition written reads back as begun %v, the teardown's was %v", tc.name, decision.Begun(written), decision.Begun(tc.mc))
		}
	}

	// Released, the budget's hold no longer colours what else holds it.
	released := deleting("a", now.Add(-time.Hour), v1alpha1.BlastRadiusExceededReason)
	released.SetAnnotations(map[string]string{v1alpha1.BlastRadiusReleasedAnnotation: "1/" + now.Add(-time.Minute).Format(time.RFC3339)})
	if got := decision.Reported(released, hooks, hookReport, now); got.Reason != v1alpha1.WaitingForHooksReason {
		t.Errorf("hooks on a released teardown: reported %s", got.Reason)
	}

	// The budget holds a teardown whose hold before its first write ended:
	// a broken policy or a dry run began nothing, and a burst that came
	// meanwhile is bounded when the policy is fixed or the dry run ends.
	one := decision.Budget{MaxTeardowns: 1, Window: time.Hour, AfterWindow: v1alpha1.AfterWindowHold}
	first := deleting("first", now.Add(-10*time.Minute), v1alpha1.DeletingStageReason)
	for _, reason := range []string{v1alpha1.CleanupFailedReason, v1alpha1.DryRunReason} {
		second := withCondition(deleting("second", now.Add(-5*time.Minute), ""), metav1.ConditionUnknown, reason)
		if decision.Begun(second) {
			t.Errorf("%s before the first write reads as begun", reason)
		}
		f := &decision.Fleet{Deleting: []*unstructured.Unstructured{first, second}}
		if got := decision.BudgetVerdict("p", one, f, second, now); got != v1alpha1.BlastRadiusExceededReason {
			t.Errorf("a teardown whose %s ended, beyond the budget: got %q", reason, got)
		}
	}
}

// TestRecordedTeardownIsBegun: a teardown its record says began (paused
// mid-way, its condition shows Resumed; or stopped between its first
// write and its condition's) is begun: the plan never holds it, a hold
// reported for it stays False, and it counts as in progress against
// maxConcurrent, so an earlier deletion not begun does not start beside it.
func TestRecordedTeardownIsBegun(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	resumed := deleting("b", now.Add(-10*time.Minute), v1alpha1.ResumedReason)
	earlier := deleting("c", now.Add(-20*time.Minute), "")
	f := &decision.Fleet{Deleting: []*unstructured.Unstructured{earlier, resumed},
		Begun: []decision.Started{{Cluster: "b", UID: "uid-b", Start: now.Add(-10 * time.Minute)}}}
	if !f.Recorded("uid-b") || f.Recorded("uid-c") || (*decision.Fleet)(nil).Recorded("uid-b") {
		t.Fatal("Recorded reads the wrong records")
	}
	pace := decision.Budget{MaxTeardowns: -1, Window: time.Hour, MaxConcurrent: 1}
	if got := decision.BudgetVerdict("p", pace, f, earlier, now); got != v1alpha1.WaitingForTurnReason {
		t.Errorf("maxConcurrent 1 with a resumed teardown begun by its record: the earlier deletion got %q, want to wait its turn", got)
	}
	held := &decision.Plan{Held: "x", Begun: true}
	if got := decision.Reported(resumed, held, held.HeldReport(), now); got.Pending {
		t.Errorf("a hold of a teardown begun by its record was reported as not begun")
	}
}
