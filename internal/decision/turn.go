package decision

import (
	"k8s.io/apimachinery/pkg/api/meta"
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
	Since       int64 // the condition's lastTransitionTime, in seconds
}

// TurnOf is the Turn of a deleted cluster.
func TurnOf(mc *unstructured.Unstructured) Turn {
	t := Turn{Begun: Begun(mc), Held: heldByBudget(mc)}
	if c := meta.FindStatusCondition(ClusterConditions(mc), v1alpha1.ContentDeleteSuccessCondition); c != nil {
		t.Status, t.Since = c.Status, c.LastTransitionTime.Unix()
	}
	return t
}
