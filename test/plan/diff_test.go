package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/review"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestDiffMatchesTeardown generates fleets from seeds, proposes a random
// change of one policy, and checks, for each cluster, that the plan
// `kubectl cleanup diff` decides for "after" is what the operator does
// once the change is applied: the writes of the cluster's teardown, as the
// audit log records them. The seeds and sizes are TestPlanMatchesTeardown's.
func TestDiffMatchesTeardown(t *testing.T) {
	ss := seeds(t)
	w := setup(t)
	n := testenv.EnvInt(t, "PLAN_CLUSTERS", 3)
	for _, seed := range ss {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay: PLAN_SEED=%d go test ./test/plan/ -count=1 -v -run TestDiffMatchesTeardown", seed)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			runDiffSeed(ctx, t, w, seed, fmt.Sprintf("d%d", runs.Add(1)), n)
		})
	}
}

// runDiffSeed makes the seed's fleet steady, takes diff's plans of a
// random change of one policy, applies the change, tears the fleet down
// and compares each cluster's writes with diff's "after" plan.
func runDiffSeed(ctx context.Context, t *testing.T, w *world, seed uint64, prefix string, n int) {
	f := generate(seed, prefix, n)
	t.Cleanup(func() { f.remove(w) })
	if err := w.steady(ctx, f); err != nil {
		t.Fatal(err)
	}
	old, changed := change(rand.New(rand.NewPCG(seed, 0xd1ff)), f)
	t.Logf("seed %d:%s\n  proposed: %s", seed, f.describe(), describeSpec(changed))
	proposed, err := runtime.DefaultUnstructuredConverter.ToUnstructured(changed)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: proposed}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicy"))
	disc, err := discovery.NewDiscoveryClientForConfig(w.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := review.Take(ctx, w.admin, disc, []*unstructured.Unstructured{u}, true, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := review.Decide(ctx, hub, []*unstructured.Unstructured{u}, false)
	if err != nil {
		t.Fatal(err)
	}
	mark, err := w.audit.size()
	if err != nil {
		t.Fatal(err)
	}
	// The change: the stored policy takes the proposed spec.
	if err := w.admin.Get(ctx, client.ObjectKeyFromObject(old), old); err != nil {
		t.Fatal(err)
	}
	old.Spec = changed.Spec
	if err := w.admin.Update(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := w.quiet(ctx, mark, f.clusters); err != nil {
		t.Fatal(err)
	}
	if mark, err = w.audit.size(); err != nil {
		t.Fatal(err)
	}
	if err := w.tearDown(ctx, t, f, seed); err != nil {
		t.Errorf("%v; where they stand:%s", err, w.status(f))
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
	}
	if err := w.quiet(ctx, mark, f.clusters); err != nil {
		t.Fatal(err)
	}
	events, err := w.audit.since(mark)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for _, c := range f.clusters {
		raw, err := json.Marshal(d.After[c.name])
		if err != nil {
			t.Fatal(err)
		}
		p, planErr := decodePlan(raw)
		checkCluster(t, c, p, planErr, writesTo(events, testenv.OperatorUser, c.name))
		if !equality.Semantic.DeepEqual(d.Today[c.name].Steps, d.After[c.name].Steps) || d.Today[c.name].Strategy != d.After[c.name].Strategy {
			differ++
		}
	}
	t.Logf("%d of %d cluster(s) decided otherwise after the change", differ, len(f.clusters))
}

// change draws a new spec for one of the fleet's policies and points its
// clusters at it. It keeps what the operator acts on before a deletion
// (selector, orphaning rules, signal, dry run), so that the change makes no
// write of its own, and the strategy of a policy with an unavailable
// cluster, whose agent could never finish a Required teardown.
func change(rng *rand.Rand, f *fleet) (old, changed *v1alpha1.CleanupPolicy) {
	old = f.policies[rng.IntN(len(f.policies))]
	drawn := genPolicy(rng, old.Name)
	changed = old.DeepCopy()
	s := &changed.Spec
	s.MonitoredResources, s.DeletionStages, s.KeepNamespace = drawn.Spec.MonitoredResources, drawn.Spec.DeletionStages, drawn.Spec.KeepNamespace
	unavailable := false
	for _, c := range f.clusters {
		unavailable = unavailable || (c.policy == old && !c.available)
	}
	if !unavailable {
		s.RemoveStrategy = drawn.Spec.RemoveStrategy
	}
	for _, c := range f.clusters {
		if c.policy == old {
			c.policy = changed
		}
	}
	f.policies[slices.Index(f.policies, old)] = changed
	f.strategies()
	return old.DeepCopy(), changed
}

func describeSpec(p *v1alpha1.CleanupPolicy) string {
	s := p.Spec
	return fmt.Sprintf("policy %s: default %s, %d strategy rule(s), %d monitored, %d stage(s), keepNamespace %t",
		p.Name, s.RemoveStrategy.Default, len(s.RemoveStrategy.Rules), len(s.MonitoredResources), len(s.DeletionStages),
		s.KeepNamespace != "") + " (" + strconv.Itoa(len(s.Orphaning)) + " orphaning rule(s) kept)"
}
