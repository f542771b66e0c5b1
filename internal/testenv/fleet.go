package testenv

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetAvailable sets the cluster's Available condition to status, keeping
// its other conditions, as OCM's registration controller does; a write
// that conflicts is made again on the cluster read anew.
func SetAvailable(ctx context.Context, c client.Client, name string, status metav1.ConditionStatus) error {
	for {
		mc := &unstructured.Unstructured{}
		mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
		mc.SetKind("ManagedCluster")
		if err := c.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			return err
		}
		raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
		raw = slices.DeleteFunc(raw, func(c any) bool {
			m, _ := c.(map[string]any)
			return m["type"] == clusterv1.ManagedClusterConditionAvailable
		})
		raw = append(raw, map[string]any{
			"type": clusterv1.ManagedClusterConditionAvailable, "status": string(status), "reason": "Test",
			"message": "set by the test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
		})
		if err := unstructured.SetNestedSlice(mc.Object, raw, "status", "conditions"); err != nil {
			return err
		}
		err := c.Status().Update(ctx, mc)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}
