package snapshot

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

func policy(name string) *cel.Policy {
	return &cel.Policy{Name: name, UID: types.UID(name), Spec: &v1alpha1.CleanupPolicySpec{}}
}

func clusterPinnedTo(policy string, deleting bool) *unstructured.Unstructured {
	c := NewManagedCluster()
	c.SetName("c")
	c.SetAnnotations(map[string]string{v1alpha1.GoverningPolicyAnnotation: policy})
	if deleting {
		now := metav1.Now()
		c.SetDeletionTimestamp(&now)
	}
	return c
}

func TestInputFindsThePinOfADeletingCluster(t *testing.T) {
	live, going := policy("live"), policy("going")
	broken := errors.New("does not compile")
	ps := &Policies{
		Ranked:   []*cel.Policy{live},
		Invalid:  map[string]error{"bad": broken},
		deleting: map[string]compiled{"going": {policy: going}, "bad-going": {err: broken}},
	}
	cases := []struct {
		name    string
		cluster *unstructured.Unstructured
		pinned  *cel.Policy
		err     error
	}{
		{"a valid policy", clusterPinnedTo("live", true), live, nil},
		{"a policy being deleted", clusterPinnedTo("going", true), going, nil},
		{"an invalid policy", clusterPinnedTo("bad", true), nil, broken},
		{"an invalid policy being deleted", clusterPinnedTo("bad-going", true), nil, broken},
		{"a policy that is gone", clusterPinnedTo("gone", true), nil, nil},
		{"a cluster not being deleted", clusterPinnedTo("going", false), nil, nil},
		{"no cluster", nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := ps.Input(tc.cluster, false)
			if in.Pinned != tc.pinned || !errors.Is(in.PinnedErr, tc.err) || (tc.err == nil && in.PinnedErr != nil) {
				t.Fatalf("pinned %v, %v; want %v, %v", in.Pinned, in.PinnedErr, tc.pinned, tc.err)
			}
			if len(in.Ranked) != 1 || in.Invalid["bad"] == nil {
				t.Fatal("the ranked and invalid policies are not passed on")
			}
		})
	}
}
