package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// ManagedClusters are read unstructured: CEL evaluates their content as is,
// with no conversion per evaluation.
var managedClusterGVK = clusterv1.GroupVersion.WithKind("ManagedCluster")

func newManagedClusterList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(managedClusterGVK.GroupVersion().WithKind("ManagedClusterList"))
	return l
}

func newManagedCluster() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(managedClusterGVK)
	return u
}

var manifestWorkGVK = schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork"}

// SetupIndexes registers the cache indexes the controllers read.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, newManagedCluster(), GoverningPolicyIndex, IndexGoverningPolicy)
}

// GoverningPolicyIndex indexes ManagedClusters by the policy that governs them.
const GoverningPolicyIndex = "cleanup.fleetops.dev/governing-policy"

// IndexGoverningPolicy is the index function of GoverningPolicyIndex.
func IndexGoverningPolicy(o client.Object) []string {
	if p := o.GetAnnotations()[v1alpha1.GoverningPolicyAnnotation]; p != "" {
		return []string{p}
	}
	return nil
}
