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
