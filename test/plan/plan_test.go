package plan

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

var (
	seedFlag  = flag.String("plan.seed", "", "the seeds to run, comma-separated (PLAN_SEED); default: random ones")
	seedsFlag = flag.Int("plan.seeds", 0, "how many random seeds to run (PLAN_SEEDS, default 2)")
)

// seeds are the seeds to run: PLAN_SEED (or -plan.seed), else PLAN_SEEDS
// (or -plan.seeds, default 2) random ones.
func seeds(t *testing.T) []uint64 {
	t.Helper()
	given := *seedFlag
	if given == "" {
		given = os.Getenv("PLAN_SEED")
	}
	if given != "" {
		var out []uint64
		for _, s := range strings.Split(given, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				t.Fatalf("PLAN_SEED=%q: %v", given, err)
			}
			out = append(out, n)
		}
		return out
	}
	n := *seedsFlag
	if n == 0 {
		n = testenv.EnvInt(t, "PLAN_SEEDS", 2)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = rand.Uint64()
	}
	return out
}

var runs atomic.Int64

// TestPlanMatchesTeardown generates fleets from seeds and checks, for each
// cluster, that the writes `kubectl cleanup plan CLUSTER -o json` lists
// before the cluster is deleted are the writes the operator makes tearing
// it down, as the API server's audit log records them. PLAN_CLUSTERS sets
// the clusters per seed (default 3), PLAN_TIMEOUT how long one seed may
// take (default 3m).
func TestPlanMatchesTeardown(t *testing.T) {
	ss := seeds(t)
	w := setup(t)
	n := testenv.EnvInt(t, "PLAN_CLUSTERS", 3)
	timeout := 3 * time.Minute
	if s := os.Getenv("PLAN_TIMEOUT"); s != "" {
		var err error
		if timeout, err = time.ParseDuration(s); err != nil {
			t.Fatalf("PLAN_TIMEOUT=%q: %v", s, err)
		}
	}
	var agreed, clusters int
	var failed []string
	defer func() {
		t.Logf("%d of %d cluster(s) torn down as planned; seeds that differ: %v", agreed, clusters, failed)
	}()
	for _, seed := range ss {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					failed = append(failed, strconv.FormatUint(seed, 10))
				}
			}()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("seed %d; replay: PLAN_SEED=%d go test ./test/plan/ -count=1 -v -run TestPlanMatchesTeardown (PLAN_KEEP=<dir> keeps the audit and operator logs)", seed, seed)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			ok, of := runSeed(ctx, t, w, seed, fmt.Sprintf("s%d", runs.Add(1)), n)
			agreed, clusters = agreed+ok, clusters+of
		})
	}
}

// runSeed generates the seed's fleet, makes it steady, takes each
// cluster's plan, tears the fleet down and compares. It returns how many
// clusters were torn down as planned, of how many.
func runSeed(ctx context.Context, t *testing.T, w *world, seed uint64, prefix string, n int) (agreed, clusters int) {
	f := generate(seed, prefix, n)
	t.Logf("seed %d:%s", seed, f.describe())
	t.Cleanup(func() { f.remove(w) })
	if err := w.steady(ctx, f); err != nil {
		t.Fatal(err)
	}
	mark, err := w.audit.size()
	if err != nil {
		t.Fatal(err)
	}
	// A plan that cannot be read fails the test, after the teardown: its
	// writes are reported all the same.
	plans, planErrs := map[string]*Plan{}, map[string]error{}
	for _, c := range f.clusters {
		plans[c.name], _, planErrs[c.name] = w.plan(ctx, c.name)
	}
	if err := w.tearDown(ctx, t, f, seed); err != nil {
		t.Errorf("%v; where they stand:%s", err, w.status(f))
		// The comparison below says what was written so far.
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
	for _, c := range f.clusters {
		if checkCluster(t, c, plans[c.name], planErrs[c.name], writesTo(events, testenv.OperatorUser, c.name)) {
			agreed++
		}
	}
	return agreed, len(f.clusters)
}

// steady creates the fleet and returns once it is steady, as it must be
// before its plans are taken: governed, stamped and applied, the operator
// making no more writes. The agents of the unavailable clusters go only
// then, once they applied every stamp.
func (w *world) steady(ctx context.Context, f *fleet) error {
	start, err := w.audit.size()
	if err != nil {
		return err
	}
	if err := f.create(ctx, w.admin); err != nil {
		return err
	}
	settled := func() error {
		for _, c := range f.clusters {
			if err := until(ctx, "the operator governs "+c.name+" and the agent applied its works", 200*time.Millisecond,
				func() (bool, error) { return w.settled(ctx, c) }); err != nil {
				return err
			}
		}
		return nil
	}
	if err := settled(); err != nil {
		return err
	}
	if err := w.quiet(ctx, start, f.clusters); err != nil {
		return err
	}
	if err := settled(); err != nil {
		return err
	}
	for _, c := range f.clusters {
		if !c.available {
			w.agent.SetOffline(c.name, true)
			if err := testenv.SetAvailable(ctx, w.admin, c.name, metav1.ConditionUnknown); err != nil {
				return err
			}
		}
	}
	return w.quiet(ctx, start, f.clusters)
}

// tearDown deletes the fleet's clusters, removes the monitored objects
// once their teardown waits for them, and returns once every teardown
// ended: the cluster gone, or in dry run the plan reported.
func (w *world) tearDown(ctx context.Context, t *testing.T, f *fleet, seed uint64) error {
	// The operator deletes a planned collection one by one while its
	// admission policy is younger than the settle time.
	if err := until(ctx, "the admission policy has settled", 200*time.Millisecond, func() (bool, error) {
		for _, key := range []struct{ kind, name string }{
			{"ValidatingAdmissionPolicy", admissionpolicy.DeletingClusterPolicy},
			{"ValidatingAdmissionPolicyBinding", admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy)},
		} {
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: key.kind})
			if err := w.admin.Get(ctx, client.ObjectKey{Name: key.name}, obj); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			last := obj.CreationTimestamp.Time
			for _, m := range obj.ManagedFields {
				if m.Time != nil && m.Time.After(last) {
					last = m.Time.Time
				}
			}
			if time.Since(last) < teardown.AdmissionSettle+time.Second {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	for _, c := range f.clusters {
		if err := w.admin.Delete(ctx, newManagedCluster(c.name)); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, c := range f.clusters {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() {
			if err := w.removeMonitored(ctx, rng, c); err != nil {
				t.Error(err)
			}
		})
	}
	return until(ctx, "the teardowns to end", 200*time.Millisecond, func() (bool, error) {
		for _, c := range f.clusters {
			reason, _, gone, err := w.contentDeleteReason(ctx, c.name)
			if err != nil {
				return false, err
			}
			if !gone && !(c.dryRun() && reason == v1alpha1.DryRunReason) {
				return false, nil
			}
		}
		return true, nil
	})
}

// checkCluster compares the plan of a cluster with the writes of its
// teardown, or reports the writes when there is no plan to compare with.
// It says whether they agree.
func checkCluster(t *testing.T, c *cluster, p *Plan, planErr error, writes []Write) bool {
	t.Helper()
	if planErr != nil {
		var b strings.Builder
		for i, wr := range writes {
			fmt.Fprintf(&b, "\n    #%d %s", i+1, wr)
		}
		t.Errorf("cluster %s: %v\n  the operator's writes tearing it down:%s", c, planErr, b.String())
		return false
	}
	cmp := compare(p, writes)
	if !cmp.ok() {
		t.Errorf("cluster %s: the operator's writes tearing it down differ from its plan:\n%s%s", c, cmp.report(), describePlan(p))
		return false
	}
	t.Logf("cluster %s: %d write(s) in %d block(s), as planned", c, len(cmp.writes), len(cmp.blocks))
	return true
}

// removeMonitored deletes the cluster's monitored ConfigMaps, as their
// controllers would, once the teardown reports that it waits for them and
// has been seen waiting a few more times (drawn from rng).
func (w *world) removeMonitored(ctx context.Context, rng *rand.Rand, c *cluster) error {
	var objs []client.Object
	for _, o := range c.objects {
		if monitored(o) {
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil
	}
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	more := rng.IntN(4)
	seen := 0
	return until(ctx, "the teardown of "+c.name+" to wait for its monitored objects", 100*time.Millisecond, func() (bool, error) {
		reason, _, gone, err := w.contentDeleteReason(ctx, c.name)
		switch {
		case err != nil || gone:
			return gone, err
		case reason == v1alpha1.DryRunReason:
			return true, nil // a dry run waits for nothing
		case reason != v1alpha1.WaitingForMonitoredResourcesReason:
			return false, nil
		}
		if seen++; seen <= more {
			return false, nil
		}
		for _, o := range objs {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName()}}
			if err := w.admin.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// status says where each cluster's teardown stands.
func (w *world) status(f *fleet) string {
	var b strings.Builder
	for _, c := range f.clusters {
		reason, message, gone, err := w.contentDeleteReason(context.Background(), c.name)
		if gone {
			reason = "gone"
		}
		fmt.Fprintf(&b, "\n  %s: %s %s %v", c.name, reason, message, err)
	}
	return b.String()
}

// remove lets the clusters of a dry run go (their finalizer stays),
// deletes the fleet's policies and brings its agents back online.
func (f *fleet) remove(w *world) {
	ctx := context.Background()
	for _, c := range f.clusters {
		w.agent.SetOffline(c.name, false)
		if c.dryRun() {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
			_ = w.admin.Patch(ctx, newManagedCluster(c.name), patch)
		}
	}
	for _, p := range f.policies {
		_ = w.admin.Delete(ctx, p.DeepCopy())
	}
}
