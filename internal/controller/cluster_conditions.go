package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// clusterConditions reads a ManagedCluster's status conditions.
func clusterConditions(mc *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// setContentDeleteCondition sets ContentDeleteSuccess on the cluster and
// reports whether it changed. Other controllers' conditions are kept as they are.
func setContentDeleteCondition(mc *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) bool {
	if len(message) > maxMessage {
		message = message[:maxMessage-3] + "..."
	}
	conds := clusterConditions(mc)
	changed := meta.SetStatusCondition(&conds, metav1.Condition{
		Type:    v1alpha1.ContentDeleteSuccessCondition,
		Status:  status,
		Reason:  reason,
		Message: message,
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

// clusterAvailable reports whether the cluster's ManagedClusterConditionAvailable is True.
func clusterAvailable(mc *unstructured.Unstructured) bool {
	return meta.IsStatusConditionTrue(clusterConditions(mc), clusterv1.ManagedClusterConditionAvailable)
}
