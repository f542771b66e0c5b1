package decision

import (
	"slices"

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
