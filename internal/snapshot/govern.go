package snapshot

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Govern reads the named ManagedCluster and every CleanupPolicy, and
// resolves the policy that governs the cluster (decision.Resolve). When
// there is no ManagedCluster of that name, standalone says whether the
// standalone rule applies (an object in a namespace that names no cluster);
// otherwise nothing governs.
func (r *Reader) Govern(ctx context.Context, clusterName string, standalone bool) (*decision.Governed, error) {
	budget := cel.NewBudget(cel.ReconcileCostBudget)
	cluster := NewManagedCluster()
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: clusterName}, cluster); {
	case apierrors.IsNotFound(err):
		if !standalone {
			return &decision.Governed{Budget: budget}, nil
		}
		cluster = nil
	case err != nil:
		return nil, err
	}
	policies, err := CompileAll(ctx, r.Client, r.Cache)
	if err != nil {
		return nil, err
	}
	return r.Governance.Resolve(ctx, budget, policies.Input(cluster, standalone)), nil
}
