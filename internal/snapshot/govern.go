package snapshot

import (
	"context"
	"fmt"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// ListPolicies lists every CleanupPolicy as stored, undecoded.
func ListPolicies(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	list := newCleanupPolicyList()
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing CleanupPolicies: %w", err)
	}
	return list.Items, nil
}

// DecodePolicy decodes one stored CleanupPolicy; see cel.DecodePolicy.
func DecodePolicy(u *unstructured.Unstructured) (*v1alpha1.CleanupPolicy, field.ErrorList) {
	return cel.DecodePolicy(u.Object)
}

// Policies are every CleanupPolicy, compiled.
type Policies struct {
	// Ranked are the valid policies not being deleted, by precedence.
	Ranked []*cel.Policy
	// Invalid are the errors of the policies not being deleted that do not
	// compile or that are stored with a field the operator cannot decode.
	Invalid map[string]error
	// deleting are the policies being deleted, compiled or not: they govern
	// nothing new, only the teardowns they started, found by name.
	deleting map[string]compiled
	// suspended are the names of the policies stored with spec.suspend
	// true, read raw: valid or not, being deleted or not.
	suspended map[string]bool
}

type compiled struct {
	policy *cel.Policy
	err    error
}

// CompileAll compiles every CleanupPolicy, from the cache of compiled
// policies. The list is read without a copy: decoding copies what it keeps,
// once per generation.
func CompileAll(ctx context.Context, r client.Reader, cache *cel.Cache) (*Policies, error) {
	items, err := ListPolicies(ctx, r, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	ps := &Policies{Invalid: map[string]error{}, deleting: map[string]compiled{}, suspended: map[string]bool{}}
	var valid []*cel.Policy
	for i := range items {
		u := &items[i]
		if suspend, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); suspend {
			ps.suspended[u.GetName()] = true
		}
		p, errs := cache.Load(u.GetUID(), u.GetGeneration(), func() (*v1alpha1.CleanupPolicy, field.ErrorList) {
			return DecodePolicy(u)
		})
		switch {
		case u.GetDeletionTimestamp() != nil:
			ps.deleting[u.GetName()] = compiled{policy: p, err: errs.ToAggregate()}
		case len(errs) > 0:
			ps.Invalid[u.GetName()] = errs.ToAggregate()
		default:
			valid = append(valid, p)
		}
	}
	ps.Ranked = decision.Ranked(valid)
	return ps, nil
}

// Input is what governance takes for cluster (nil: none of that name).
func (ps *Policies) Input(cluster *unstructured.Unstructured, standalone bool) decision.Input {
	in := decision.Input{Cluster: cluster, Standalone: standalone, Ranked: ps.Ranked, Invalid: ps.Invalid, Suspended: ps.Suspended()}
	if !decision.Pinned(cluster) {
		return in
	}
	name := decision.Pin(cluster)
	if c, ok := ps.deleting[name]; ok {
		in.Pinned, in.PinnedErr = c.policy, c.err
		return in
	}
	if err, ok := ps.Invalid[name]; ok {
		in.PinnedErr = err
		return in
	}
	for _, p := range ps.Ranked {
		if p.Name == name {
			in.Pinned = p
		}
	}
	return in
}

// Suspended are the names of the suspended policies: those stored with
// spec.suspend true (read raw, so a policy that does not decode counts),
// and the compiled ones that say so.
func (ps *Policies) Suspended() map[string]bool {
	out := make(map[string]bool, len(ps.suspended))
	for name := range ps.suspended {
		out[name] = true
	}
	for _, p := range ps.Ranked {
		if p.Spec.Suspend {
			out[p.Name] = true
		}
	}
	for name, c := range ps.deleting {
		if c.policy != nil && c.policy.Spec.Suspend {
			out[name] = true
		}
	}
	return out
}
