package policy

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// TestGuardedCondition: the condition follows what the guard last said,
// none is set before it says anything, and only a change wakes the policies.
func TestGuardedCondition(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	cases := []struct {
		name    string
		say     func(s *GuardState)
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{name: "nothing said yet: no condition", say: func(*GuardState) {}},
		{name: "running", say: (*GuardState).Running, status: metav1.ConditionTrue, reason: v1alpha1.GuardsInPlaceReason,
			message: guardedMessage + "; it has put back none since it started"},
		{
			name: "the last restore, in UTC",
			say: func(s *GuardState) {
				s.Running()
				s.Restored("FlowSchema", "fs", "changed", at.Add(-time.Minute))
				s.Restored("ValidatingAdmissionPolicyBinding", "b", "deleted", at)
			},
			status: metav1.ConditionTrue, reason: v1alpha1.GuardsInPlaceReason,
			message: guardedMessage + "; the last it put back since it started: ValidatingAdmissionPolicyBinding b was deleted; put back at 2026-11-27T11:00:00Z",
		},
		{name: "unrestorable", say: func(s *GuardState) { s.Unrestorable("the operator may not create x") },
			status: metav1.ConditionFalse, reason: v1alpha1.GuardUnrestorableReason, message: "the operator may not create x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewGuardState()
			tc.say(s)
			p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			setGuardedCondition(p, s)
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.GuardedCondition)
			if tc.reason == "" {
				if c != nil {
					t.Fatalf("Guarded = %+v, want none", c)
				}
				return
			}
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message || c.ObservedGeneration != 3 {
				t.Fatalf("Guarded = %+v, want %s/%s %q at generation 3", c, tc.status, tc.reason, tc.message)
			}
		})
	}
	setGuardedCondition(&v1alpha1.CleanupPolicy{}, nil)

	s := NewGuardState()
	s.Running()
	<-s.changed
	s.Running()
	select {
	case <-s.changed:
		t.Fatal("the same condition woke the policies again")
	default:
	}
	s.Restored("FlowSchema", "fs", "deleted", at)
	select {
	case <-s.changed:
	default:
		t.Fatal("a restore did not wake the policies")
	}
}
