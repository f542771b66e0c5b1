package teardown

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// setContentDeleteCondition sets ContentDeleteSuccess on the cluster and
// reports whether it changed. Other controllers' conditions are kept as they are.
func setContentDeleteCondition(mc *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) bool {
	conds := decision.ClusterConditions(mc)
	changed := meta.SetStatusCondition(&conds, metav1.Condition{
		Type:    v1alpha1.ContentDeleteSuccessCondition,
		Status:  status,
		Reason:  reason,
		Message: v1alpha1.ConditionMessage(message),
	})
	if !changed {
		return false
	}
	raw := make([]any, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return false
		}
		raw[i] = m
	}
	_ = unstructured.SetNestedSlice(mc.Object, raw, "status", "conditions")
	return true
}
