package watch

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// SetupIndexes registers the cache indexes the controllers read.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, snapshot.NewManagedCluster(), GoverningPolicyIndex, IndexGoverningPolicy); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &workv1.ManifestWork{}, OrphaningStampedIndex, indexOrphaningStamped)
}

// OrphaningStampedIndex indexes the ManifestWorks that carry the operator's
// orphaning decision (v1alpha1.OrphaningAnnotation) under "true", so that
// a policy counts its stamped works without listing every work.
const OrphaningStampedIndex = "cleanup.fleetops.dev/orphaning-stamped"

func indexOrphaningStamped(o client.Object) []string {
	if o.GetAnnotations()[v1alpha1.OrphaningAnnotation] != "" {
		return []string{"true"}
	}
	return nil
}

// GoverningPolicyIndex indexes ManagedClusters by the policy that governs them.
const GoverningPolicyIndex = "cleanup.fleetops.dev/governing-policy"

// IndexGoverningPolicy is the index function of GoverningPolicyIndex.
func IndexGoverningPolicy(o client.Object) []string {
	if p := decision.PinOf(o); p != "" {
		return []string{p}
	}
	return nil
}
