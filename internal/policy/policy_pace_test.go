package policy

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

func TestFleetPace(t *testing.T) {
	var p fleetPace
	if got := p.after("p"); got != 0 {
		t.Fatalf("a policy with no pass yet waits %s, want 0", got)
	}
	p.passed("p", 300*time.Millisecond)
	if got := p.after("p"); got != 1200*time.Millisecond {
		t.Fatalf("after a pass of 300ms: %s, want 1.2s", got)
	}
	if got := p.after("q"); got != 0 {
		t.Fatalf("another policy waits %s, want 0", got)
	}
	p.passed("p", time.Minute)
	if got := p.after("p"); got != maxFleetPace {
		t.Fatalf("after a pass of a minute: %s, want the bound %s", got, maxFleetPace)
	}
	p.forget("p")
	if got := p.after("p"); got != 0 {
		t.Fatalf("a deleted policy's pace is kept: %s", got)
	}
}

func TestCountsWait(t *testing.T) {
	var p fleetPace
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	if got := p.countsWait("p", now); got != 0 {
		t.Fatalf("never written: waits %s, want 0", got)
	}
	p.statusWritten("p", now)
	if got := p.countsWait("p", now.Add(time.Second)); got != maxFleetPace-time.Second {
		t.Fatalf("a second after a write: waits %s, want %s", got, maxFleetPace-time.Second)
	}
	if got := p.countsWait("p", now.Add(maxFleetPace)); got != 0 {
		t.Fatalf("once the pace passed: waits %s, want 0", got)
	}
	p.forget("p")
	if got := p.countsWait("p", now); got != 0 {
		t.Fatalf("a deleted policy's last write is kept: %s", got)
	}
}

func TestCountsOnly(t *testing.T) {
	ready := func(msg string) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SucceededReason, Message: msg}
	}
	base := v1alpha1.CleanupPolicyStatus{ObservedGeneration: 1, MatchedClusters: 20, GovernedClusters: 20,
		Conditions: []metav1.Condition{ready("matches 20 cluster(s) and governs 20"), {Type: v1alpha1.GuardedCondition,
			Status: metav1.ConditionTrue, Reason: v1alpha1.GuardsInPlaceReason, Message: guardedMessage}}}
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.CleanupPolicyStatus)
		want   bool
	}{
		{"clusters deleting and gone", func(s *v1alpha1.CleanupPolicyStatus) {
			s.MatchedClusters, s.GovernedClusters, s.ClustersDeleting = 18, 18, 5
			s.Conditions[0].Message = "matches 18 cluster(s) and governs 18"
		}, true},
		{"works stamped", func(s *v1alpha1.CleanupPolicyStatus) { s.WorksStamped, s.PoliciesStamped = 3, 1 }, true},
		{"a new generation", func(s *v1alpha1.CleanupPolicyStatus) { s.ObservedGeneration = 2 }, false},
		{"Ready turns False", func(s *v1alpha1.CleanupPolicyStatus) {
			s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.EvaluationErrorReason
		}, false},
		{"a condition more", func(s *v1alpha1.CleanupPolicyStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: v1alpha1.StalledCondition, Status: metav1.ConditionTrue})
		}, false},
		{"a selector failed", func(s *v1alpha1.CleanupPolicyStatus) { s.EvaluationErrors = 1 }, false},
		{"objects not owned", func(s *v1alpha1.CleanupPolicyStatus) { s.NotOwned = 1 }, false},
		{"the guard put an object back", func(s *v1alpha1.CleanupPolicyStatus) {
			s.Conditions[1].Message = guardedMessage + "; the last it put back since it started: FlowSchema f was deleted"
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := base.DeepCopy()
			changed.Conditions = slices.Clone(base.Conditions)
			tc.change(changed)
			if got := countsOnly(&base, changed); got != tc.want {
				t.Fatalf("countsOnly: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStoredAlike(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	status := func(t time.Time) *v1alpha1.CleanupPolicyStatus {
		return &v1alpha1.CleanupPolicyStatus{Conditions: []metav1.Condition{{Type: v1alpha1.StalledCondition, Status: metav1.ConditionTrue,
			Reason: v1alpha1.InvalidCELExpressionReason, LastTransitionTime: metav1.NewTime(t)}}}
	}
	if !storedAlike(status(at), status(at.Add(290*time.Millisecond))) {
		t.Fatal("a time set again within the second read back is taken for a change")
	}
	if storedAlike(status(at), status(at.Add(time.Second))) {
		t.Fatal("a time a second later is taken for the same")
	}
}
