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

// Current says whether g, resolved by Govern for the named cluster, still
// holds: the cache has the ManagedCluster at the resourceVersion g read (or
// still none), and the governing policy at the generation g compiled. A
// reconcile that decides many objects under one g checks it before each:
// a teardown begun, a pause or a policy's new generation meanwhile make it
// resolve again. A policy that newly outranks g's is not seen here; its
// event queues the objects again.
func (r *Reader) Current(ctx context.Context, clusterName string, g *decision.Governed) (bool, error) {
	cluster := NewManagedCluster()
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: clusterName}, cluster, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err):
		if g.Cluster != nil {
			return false, nil
		}
	case err != nil:
		return false, err
	case g.Cluster == nil || cluster.GetResourceVersion() != g.Cluster.GetResourceVersion():
		return false, nil
	}
	if g.Policy == nil {
		return true, nil
	}
	policy := NewCleanupPolicy()
	if err := r.Client.Get(ctx, client.ObjectKey{Name: g.Policy.Name}, policy, client.UnsafeDisableDeepCopy); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return policy.GetUID() == g.Policy.UID && policy.GetGeneration() == g.Policy.Generation, nil
}
