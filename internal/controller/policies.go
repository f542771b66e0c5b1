package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// CleanupPolicies are read unstructured and decoded one by one. A typed
// informer decodes the whole list at once: one stored policy it cannot
// decode (a timeout written before the schema refused it) would fail every
// list, and the operator would see no policy at all. Read this way, that
// policy alone is reported, and the clusters it governs are held.
// Nothing in the operator may read CleanupPolicies typed from the cache.
var cleanupPolicyGVK = v1alpha1.GroupVersion.WithKind("CleanupPolicy")

func newCleanupPolicy() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cleanupPolicyGVK)
	return u
}

func newCleanupPolicyList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(cleanupPolicyGVK.GroupVersion().WithKind("CleanupPolicyList"))
	return l
}

// listPolicies lists every CleanupPolicy as stored, undecoded.
func listPolicies(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	list := newCleanupPolicyList()
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing CleanupPolicies: %w", err)
	}
	return list.Items, nil
}

// decodePolicy decodes one stored CleanupPolicy; see cel.DecodePolicy.
func decodePolicy(u *unstructured.Unstructured) (*v1alpha1.CleanupPolicy, field.ErrorList) {
	return cel.DecodePolicy(u.Object)
}
