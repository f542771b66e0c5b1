package policy

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

func TestConditionSetters(t *testing.T) {
	type want struct {
		ready       metav1.ConditionStatus
		reason      string
		stalled     bool
		reconciling bool
	}
	cases := []struct {
		name string
		set  func(p *v1alpha1.CleanupPolicy)
		want want
	}{
		{
			name: "ready drops stalled and reconciling",
			set: func(p *v1alpha1.CleanupPolicy) {
				setStalledCondition(p, v1alpha1.EvaluationErrorReason, "x")
				setReconcilingCondition(p, v1alpha1.BudgetExhaustedReason, "y")
				setReadyCondition(p, metav1.ConditionTrue, v1alpha1.SucceededReason, "ok")
			},
			want: want{ready: metav1.ConditionTrue, reason: v1alpha1.SucceededReason},
		},
		{
			name: "suspended is ready, neither stalled nor reconciling",
			set: func(p *v1alpha1.CleanupPolicy) {
				setStalledCondition(p, v1alpha1.EvaluationErrorReason, "x")
				setReconcilingCondition(p, v1alpha1.BudgetExhaustedReason, "y")
				setSuspendedCondition(p, suspendedMessage)
			},
			want: want{ready: metav1.ConditionTrue, reason: v1alpha1.SuspendedReason},
		},
		{
			name: "stalled is not ready",
			set:  func(p *v1alpha1.CleanupPolicy) { setStalledCondition(p, v1alpha1.EvaluationErrorReason, "x") },
			want: want{ready: metav1.ConditionFalse, reason: v1alpha1.EvaluationErrorReason, stalled: true},
		},
		{
			name: "a failed reconcile is not ready on what an earlier one found",
			set: func(p *v1alpha1.CleanupPolicy) {
				setReadyCondition(p, metav1.ConditionTrue, v1alpha1.SucceededReason, "matches 2 cluster(s) and governs 2")
				setReconcileFailed(p, errors.New("listing ManagedClusters: the server is currently unable to handle the request"))
			},
			want: want{ready: metav1.ConditionFalse, reason: v1alpha1.ReconcileErrorReason, reconciling: true},
		},
		{
			name: "reconciling is not ready",
			set:  func(p *v1alpha1.CleanupPolicy) { setReconcilingCondition(p, v1alpha1.BudgetExhaustedReason, "y") },
			want: want{ready: metav1.ConditionFalse, reason: v1alpha1.BudgetExhaustedReason, reconciling: true},
		},
		{
			name: "an expression error is InvalidCELExpression",
			set: func(p *v1alpha1.CleanupPolicy) {
				setInvalidCondition(p, field.ErrorList{
					field.Duplicate(field.NewPath("spec", "deletionStages").Index(1).Child("name"), "a"),
					field.Invalid(field.NewPath("spec", "orphaning").Index(0).Child("when"), "x", "compilation failed"),
				})
			},
			want: want{ready: metav1.ConditionFalse, reason: v1alpha1.InvalidCELExpressionReason, stalled: true},
		},
		{
			name: "a structural error alone is InvalidSpec",
			set: func(p *v1alpha1.CleanupPolicy) {
				setInvalidCondition(p, field.ErrorList{field.Required(field.NewPath("spec", "deletionStages").Index(0).Child("resource"), "")})
			},
			want: want{ready: metav1.ConditionFalse, reason: v1alpha1.InvalidSpecReason, stalled: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
			tc.set(p)
			ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ReadyCondition)
			if ready == nil || ready.Status != tc.want.ready || ready.Reason != tc.want.reason {
				t.Fatalf("Ready = %+v, want %s/%s", ready, tc.want.ready, tc.want.reason)
			}
			if ready.ObservedGeneration != 4 {
				t.Fatalf("Ready.observedGeneration = %d, want 4", ready.ObservedGeneration)
			}
			if got := meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.StalledCondition); got != tc.want.stalled {
				t.Fatalf("Stalled = %v, want %v", got, tc.want.stalled)
			}
			if got := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ReconcilingCondition) != nil; got != tc.want.reconciling {
				t.Fatalf("Reconciling present = %v, want %v", got, tc.want.reconciling)
			}
		})
	}
}

func TestConditionMessageIsBounded(t *testing.T) {
	p := &v1alpha1.CleanupPolicy{}
	long := make([]byte, 40000)
	for i := range long {
		long[i] = 'x'
	}
	setReadyCondition(p, metav1.ConditionFalse, v1alpha1.EvaluationErrorReason, string(long))
	if n := len(p.Status.Conditions[0].Message); n > v1alpha1.MaxConditionMessage {
		t.Fatalf("message of %d bytes, the API accepts %d", n, v1alpha1.MaxConditionMessage)
	}
}
