package decision

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// WorkValue is the work as WorkOrphaning binds it for the rules.
var WorkValue = workValue

// BudgetVerdict is the blast radius's verdict on a teardown not begun:
// its reason, "" when it may begin.
func BudgetVerdict(policy string, b Budget, f *Fleet, mc *unstructured.Unstructured, now time.Time) string {
	if v := budgetVerdict(policy, b, f, mc, now); v != nil {
		return v.reason
	}
	return ""
}

// BudgetRequeue is when the blast radius looks again at a teardown it
// holds: 0 for never by time, or when it does not hold it.
func BudgetRequeue(policy string, b Budget, f *Fleet, mc *unstructured.Unstructured, now time.Time) time.Duration {
	if v := budgetVerdict(policy, b, f, mc, now); v != nil {
		return v.requeue
	}
	return 0
}
