package decision_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// A teardown's Turn changes when the others' turns may: as it begins, is
// held, ends, or its condition's time moves; not as it steps.
func TestTurnChangesOnlyWhatTheBudgetReads(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	withStatus := func(mc *unstructured.Unstructured, status string) *unstructured.Unstructured {
		conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		conds[0].(map[string]any)["status"] = status
		_ = unstructured.SetNestedSlice(mc.Object, conds, "status", "conditions")
		return mc
	}
	for _, tc := range []struct {
		name      string
		old, new  *unstructured.Unstructured
		wakesNone bool
	}{
		{"a step of a teardown under way", deleting("c", at, v1alpha1.DeletingStageReason), deleting("c", at, v1alpha1.ResourcesRemainingReason), true},
		{"the same step, another count", deleting("c", at, v1alpha1.DeletingStageReason), deleting("c", at, v1alpha1.DeletingStageReason), true},
		{"a teardown begins", deleting("c", at, v1alpha1.WaitingForTurnReason), deleting("c", at, v1alpha1.DeletingStageReason), false},
		{"a first report", deleting("c", at, ""), deleting("c", at, v1alpha1.WaitingForTurnReason), false},
		{"the budget holds one waiting its turn", deleting("c", at, v1alpha1.WaitingForTurnReason), deleting("c", at, v1alpha1.BlastRadiusExceededReason), false},
		{"a teardown ends", deleting("c", at, v1alpha1.DeletingStageReason), withStatus(deleting("c", at, v1alpha1.CompletedReason), "True"), false},
		{"its condition's time moves", deleting("c", at, v1alpha1.DeletingStageReason), begunAt(deleting("c", at, v1alpha1.DeletingStageReason), at.Add(time.Minute)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if same := decision.TurnOf(tc.old) == decision.TurnOf(tc.new); same != tc.wakesNone {
				t.Errorf("TurnOf the same: %v, want %v (%+v, %+v)", same, tc.wakesNone, decision.TurnOf(tc.old), decision.TurnOf(tc.new))
			}
		})
	}
}
