package decision_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestAvailableByLease: a cluster whose Available condition is not True is
// available while its agent's lease is within OCM's grace (5 lease
// durations, 60 s each unless the cluster sets one), and only then.
func TestAvailableByLease(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cluster := func(leaseSeconds int64, available string) *unstructured.Unstructured {
		mc := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		if leaseSeconds > 0 {
			_ = unstructured.SetNestedField(mc.Object, leaseSeconds, "spec", "leaseDurationSeconds")
		}
		if available != "" {
			_ = unstructured.SetNestedSlice(mc.Object, []any{map[string]any{"type": "ManagedClusterConditionAvailable", "status": available,
				"reason": "x", "lastTransitionTime": now.Format(time.RFC3339)}}, "status", "conditions")
		}
		return mc
	}
	lease := func(ago time.Duration) *coordinationv1.Lease {
		renewed := metav1.NewMicroTime(now.Add(-ago))
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}}
	}
	for name, tc := range map[string]struct {
		cluster *unstructured.Unstructured
		lease   *coordinationv1.Lease
		want    bool
	}{
		"condition True, no lease":                                       {cluster(0, "True"), nil, true},
		"condition True, stale lease":                                    {cluster(0, "True"), lease(time.Hour), true},
		"condition False, no lease":                                      {cluster(0, "False"), nil, false},
		"condition Unknown, lease renewed 4m ago":                        {cluster(0, "Unknown"), lease(4 * time.Minute), true},
		"condition False, lease renewed 5m ago":                          {cluster(0, "False"), lease(5 * time.Minute), false},
		"no condition, lease within 5 x 2s":                              {cluster(2, ""), lease(9 * time.Second), true},
		"no condition, lease past 5 x 2s":                                {cluster(2, ""), lease(11 * time.Second), false},
		"condition False, lease never renewed":                           {cluster(0, "False"), &coordinationv1.Lease{}, false},
		"condition False, the longest lease duration, renewed a day ago": {cluster(2147483647, "False"), lease(24 * time.Hour), true},
	} {
		s := &decision.Snapshot{Cluster: tc.cluster, Lease: tc.lease, Now: now}
		if got := s.Available(); got != tc.want {
			t.Errorf("%s: Available() = %v, want %v", name, got, tc.want)
		}
	}
}
