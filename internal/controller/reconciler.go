package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Adapter is what the generic reconciler needs to know of one kind of
// target: how to make one, which cluster decides for it, what to do, and
// what else to watch.
type Adapter[T client.Object] interface {
	// Name names the controller.
	Name() string
	// New returns an empty object of the kind.
	New() T
	// ClusterName is the ManagedCluster whose governing policy decides for obj.
	ClusterName(obj T) string
	// Reconcile applies the governing policy's decisions to obj.
	Reconcile(ctx context.Context, obj T, g *Governed) (reconcile.Result, error)
	// Watches adds the adapter's other watches to the controller.
	Watches(b *builder.Builder) *builder.Builder
}

// Reconciler is the one reconciler of every target kind: it fetches the
// object, finds the policy that governs its cluster, and hands both to the
// kind's adapter.
type Reconciler[T client.Object] struct {
	client.Client
	Fleet   *Fleet
	Adapter Adapter[T]
	// MaxConcurrentReconciles is how many objects are reconciled at once;
	// 0 means one.
	MaxConcurrentReconciles int
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.Adapter.New()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	g, err := r.Fleet.Govern(ctx, r.Adapter.ClusterName(obj))
	if err != nil {
		return reconcile.Result{}, err
	}
	if s, ok := r.Adapter.(interface{ Standalone() bool }); ok && s.Standalone() && g.Cluster == nil {
		if g, err = r.Fleet.GovernStandalone(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	return r.Adapter.Reconcile(ctx, obj, g)
}

// SetupWithManager registers the controller, For the adapter's kind.
func (r *Reconciler[T]) SetupWithManager(mgr manager.Manager) error {
	b := builder.ControllerManagedBy(mgr).Named(r.Adapter.Name()).For(r.Adapter.New()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)})
	c, err := r.Adapter.Watches(b).Build(r)
	if err != nil {
		return err
	}
	// Adapters that add watches at run time get the controller.
	if s, ok := r.Adapter.(interface{ SetController(controller.Controller) }); ok {
		s.SetController(c)
	}
	return nil
}

// Fleet answers which policy governs a cluster, for every adapter.
type Fleet struct {
	client.Reader
	Cache      *cel.Cache
	Governance *decision.Governance
}

// GovernStandalone resolves the policy of an object in a namespace that
// names no ManagedCluster: the highest-priority policy with an empty
// clusterSelector, with `cluster` null.
func (f *Fleet) GovernStandalone(ctx context.Context) (*Governed, error) {
	g := &Governed{Budget: cel.NewBudget(cel.ReconcileCostBudget)}
	all, _, err := compileAll(ctx, f, f.Cache)
	if err != nil {
		return nil, err
	}
	var valid []*cel.Policy
	for _, p := range all {
		if p.ClusterSelector == nil {
			valid = append(valid, p)
		}
	}
	if len(valid) > 0 {
		g.Policy = valid[0]
		g.Activation = g.Policy.Bind(ctx, g.Budget, nil)
	}
	return g, nil
}

// compileAll compiles every CleanupPolicy not being deleted, from the cache
// of compiled policies, and returns the valid ones ranked, and the errors of
// the others by name: a policy that does not compile, or that is stored with
// a field the operator cannot decode. The list is read without a copy:
// decoding copies what it keeps, once per generation.
func compileAll(ctx context.Context, r client.Reader, cache *cel.Cache) ([]*cel.Policy, map[string]error, error) {
	items, err := listPolicies(ctx, r, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, nil, err
	}
	var valid []*cel.Policy
	invalid := map[string]error{}
	for i := range items {
		u := &items[i]
		if u.GetDeletionTimestamp() != nil {
			// A policy being deleted governs nothing new: only the
			// teardowns it started, which Govern finds by name.
			continue
		}
		compiled, errs := cache.Load(u.GetUID(), u.GetGeneration(), func() (*v1alpha1.CleanupPolicy, field.ErrorList) {
			return decodePolicy(u)
		})
		if len(errs) > 0 {
			invalid[u.GetName()] = errs.ToAggregate()
			continue
		}
		valid = append(valid, compiled)
	}
	return decision.Ranked(valid), invalid, nil
}

// Governed is the decision context of one reconcile.
type Governed struct {
	// Cluster is the ManagedCluster; nil when there is none of that name.
	Cluster *unstructured.Unstructured
	// Policy governs the cluster; nil when none does.
	Policy *cel.Policy
	// Held, when set, says why no decision may be taken now: a policy that
	// could govern the cluster failed, or the policy that governs it does
	// not compile. The adapter holds the object as it is and reports.
	Held error
	// Budget is this reconcile's CEL budget.
	Budget *cel.Budget
	// Activation binds the cluster for the policy's expressions.
	Activation *cel.Activation
}

// Govern resolves the policy that governs the named cluster. A cluster being
// deleted stays with the policy named in its annotation while that policy
// exists, so that a cleanup is finished by the policy that started it.
func (f *Fleet) Govern(ctx context.Context, clusterName string) (*Governed, error) {
	g := &Governed{Budget: cel.NewBudget(cel.ReconcileCostBudget)}
	cluster := newManagedCluster()
	switch err := f.Get(ctx, client.ObjectKey{Name: clusterName}, cluster); {
	case apierrors.IsNotFound(err):
		return g, nil
	case err != nil:
		return nil, err
	}
	g.Cluster = cluster

	pinned := cluster.GetAnnotations()[v1alpha1.GoverningPolicyAnnotation]
	if cluster.GetDeletionTimestamp() != nil && pinned != "" {
		// The policy that started the teardown finishes it, even while it
		// is being deleted: its in-use finalizer keeps it until then.
		p, err := f.pinnedPolicy(ctx, pinned)
		if err != nil {
			var invalid *invalidPolicyError
			if errors.As(err, &invalid) {
				g.Held = err
				return g, nil
			}
			return nil, err
		}
		if p != nil {
			g.Policy = p
			g.Activation = p.Bind(ctx, g.Budget, cluster.Object)
			return g, nil
		}
	}

	valid, invalid, err := compileAll(ctx, f, f.Cache)
	if err != nil {
		return nil, err
	}
	if err, broken := invalid[pinned]; broken {
		g.Held = &invalidPolicyError{name: pinned, err: err}
		return g, nil
	}

	res := f.Governance.Resolve(ctx, g.Budget, valid, cluster)
	if res.Governor == nil && len(res.Errors) > 0 {
		var msgs []string
		for p, err := range res.Errors {
			msgs = append(msgs, fmt.Sprintf("CleanupPolicy %s: %v", p.Name, err))
		}
		slices.Sort(msgs)
		g.Held = errors.New(strings.Join(msgs, "; "))
		return g, nil
	}
	if res.Governor != nil {
		g.Policy = res.Governor
		g.Activation = res.Governor.Bind(ctx, g.Budget, cluster.Object)
	}
	return g, nil
}

// invalidPolicyError says the policy that governs a cluster does not compile.
type invalidPolicyError struct {
	name string
	err  error
}

func (e *invalidPolicyError) Error() string {
	return fmt.Sprintf("CleanupPolicy %s, which governs this cluster, does not compile: %v", e.name, e.err)
}

func (e *invalidPolicyError) Unwrap() error { return e.err }

// pinnedPolicy returns the named policy, compiled, whether or not it is
// being deleted; nil when there is none of that name.
func (f *Fleet) pinnedPolicy(ctx context.Context, name string) (*cel.Policy, error) {
	u := newCleanupPolicy()
	if err := f.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	compiled, errs := f.Cache.Load(u.GetUID(), u.GetGeneration(), func() (*v1alpha1.CleanupPolicy, field.ErrorList) {
		return decodePolicy(u)
	})
	if len(errs) > 0 {
		return nil, &invalidPolicyError{name: name, err: errs.ToAggregate()}
	}
	return compiled, nil
}
