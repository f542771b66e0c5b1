package snapshot

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// ManagedClusters are read unstructured: CEL evaluates their content as is,
// with no conversion per evaluation.
var ManagedClusterGVK = clusterv1.GroupVersion.WithKind("ManagedCluster")

// ManifestWorkGVK is ManifestWork's group, version and kind.
var ManifestWorkGVK = workv1.GroupVersion.WithKind("ManifestWork")

// NewManagedCluster returns an empty ManagedCluster to read into.
func NewManagedCluster() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ManagedClusterGVK)
	return u
}

// NewManagedClusterList returns an empty list of ManagedClusters to read into.
func NewManagedClusterList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(ManagedClusterGVK.GroupVersion().WithKind("ManagedClusterList"))
	return l
}

// CleanupPolicies are read unstructured and decoded one by one. A typed
// informer decodes the whole list at once: one stored policy it cannot
// decode (a timeout written before the schema refused it) would fail every
// list, and the operator would see no policy at all. Read this way, that
// policy alone is reported, and the clusters it governs are held.
// Nothing in the operator may read CleanupPolicies typed from the cache.
var CleanupPolicyGVK = v1alpha1.GroupVersion.WithKind("CleanupPolicy")

// NewCleanupPolicy returns an empty CleanupPolicy to read into, undecoded.
func NewCleanupPolicy() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(CleanupPolicyGVK)
	return u
}

func newCleanupPolicyList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(CleanupPolicyGVK.GroupVersion().WithKind("CleanupPolicyList"))
	return l
}
