package snapshot

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// Check is what a reconcile that decides many objects under one resolution
// (Govern) checks before each: whether it still holds. It reads into the
// same two objects each time, rather than making two per object, and is
// for one goroutine. After a read they hold the cache's own content, which
// nothing writes to.
type Check struct {
	r               *Reader
	cluster, policy *unstructured.Unstructured
}

// Check returns a Check of r, for the objects of one reconcile.
func (r *Reader) Check() *Check {
	return &Check{r: r, cluster: NewManagedCluster(), policy: NewCleanupPolicy()}
}

// Current says whether g, resolved by Govern for the named cluster, still
// holds: the cache has the ManagedCluster at the resourceVersion g read (or
// still none), and the governing policy at the generation g compiled. A
// teardown begun, a pause or a policy's new generation meanwhile make the
// reconcile resolve again. A policy that newly outranks g's is not seen
// here; its event queues the objects again.
func (c *Check) Current(ctx context.Context, clusterName string, g *decision.Governed) (bool, error) {
	switch err := c.r.Client.Get(ctx, client.ObjectKey{Name: clusterName}, c.cluster, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err):
		if g.Cluster != nil {
			return false, nil
		}
	case err != nil:
		return false, err
	case g.Cluster == nil || c.cluster.GetResourceVersion() != g.Cluster.GetResourceVersion():
		return false, nil
	}
	if g.Policy == nil {
		return true, nil
	}
	if err := c.r.Client.Get(ctx, client.ObjectKey{Name: g.Policy.Name}, c.policy, client.UnsafeDisableDeepCopy); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return c.policy.GetUID() == g.Policy.UID && c.policy.GetGeneration() == g.Policy.Generation, nil
}
