package stamp

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestResolvedAlike: a batch of a cluster's works goes on under a fresh
// resolution only when it decides as the one the batch began with; a
// teardown begun, a hold, or another policy (or generation) stops it, and
// the namespace is listed and decided afresh.
func TestResolvedAlike(t *testing.T) {
	cluster := func(labels map[string]string, deleting bool) *unstructured.Unstructured {
		c := &unstructured.Unstructured{}
		c.SetName("c1")
		c.SetLabels(labels)
		if deleting {
			now := metav1.Now()
			c.SetDeletionTimestamp(&now)
		}
		return c
	}
	policy := func(uid string, generation int64) *cel.Policy {
		return &cel.Policy{UID: types.UID(uid), Name: "p", Generation: generation}
	}
	began := &decision.Governed{Cluster: cluster(map[string]string{"env": "prod"}, false), Policy: policy("u1", 3)}
	for _, tc := range []struct {
		name  string
		again *decision.Governed
		alike bool
	}{
		{"the same", &decision.Governed{Cluster: cluster(map[string]string{"env": "prod"}, false), Policy: policy("u1", 3)}, true},
		{"the cluster's labels changed", &decision.Governed{Cluster: cluster(map[string]string{"env": "dev"}, false), Policy: policy("u1", 3)}, true},
		{"a teardown began", &decision.Governed{Cluster: cluster(map[string]string{"env": "prod"}, true), Policy: policy("u1", 3)}, false},
		{"a new generation of the policy", &decision.Governed{Cluster: cluster(nil, false), Policy: policy("u1", 4)}, false},
		{"the policy re-created", &decision.Governed{Cluster: cluster(nil, false), Policy: policy("u2", 3)}, false},
		{"no policy governs", &decision.Governed{Cluster: cluster(nil, false)}, false},
		{"held", &decision.Governed{Cluster: cluster(nil, false), Policy: policy("u1", 3), Held: errors.New("a policy failed")}, false},
	} {
		if got := resolvedAlike(began, tc.again); got != tc.alike {
			t.Errorf("%s: resolvedAlike = %v, want %v", tc.name, got, tc.alike)
		}
	}
}
