package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

const fleetSize = 1000

// BenchmarkPolicyFleet runs the operator on a real API server holding 1,000
// ManagedClusters. Each iteration changes one policy's selector (a new
// generation) and waits until its status reports the new match count. It
// reports, per iteration, the compilations (expected: one per generation)
// and the selector evaluations (expected: one per cluster).
func BenchmarkPolicyFleet(b *testing.B) {
	ctx := context.Background()
	f := fleet(b)
	c, op, p := f.client, f.op, f.policy
	compilations, evaluations := op.Cache.Compilations(), op.Governance.Evaluations()
	b.ResetTimer()
	for range b.N {
		f.generations++
		before := p.DeepCopy()
		// A new expression every time, matching one shard of ten.
		p.Spec.ClusterSelector = fmt.Sprintf("cluster.metadata.labels[?'shard'].orValue('') == '%d' || %d < 0", f.generations%10, f.generations)
		if err := c.Patch(ctx, p, client.MergeFrom(before)); err != nil {
			b.Fatal(err)
		}
		waitMatched(ctx, b, c, p.Generation, fleetSize/10)
	}
	b.StopTimer()
	b.ReportMetric(float64(op.Cache.Compilations()-compilations)/float64(b.N), "compilations/op")
	b.ReportMetric(float64(op.Governance.Evaluations()-evaluations)/float64(b.N), "evaluations/op")
}

// fixture is the control plane, the operator and the fleet, set up once per
// process: the benchmark function runs more than once.
type fixture struct {
	generations int
	client      client.Client
	op          *operator.Operator
	policy      *v1alpha1.CleanupPolicy
}

var (
	fixtureOnce sync.Once
	shared      *fixture
	fixtureErr  error
)

func fleet(b *testing.B) *fixture {
	fixtureOnce.Do(func() { shared, fixtureErr = setUp(b) })
	if fixtureErr != nil {
		b.Fatal(fixtureErr)
	}
	return shared
}

// setUp starts the control plane and the operator, creates the fleet and
// the policy, and waits for the first generation. The control plane lives
// as long as the process.
func setUp(b *testing.B) (*fixture, error) {
	ctx := context.Background()
	env, err := testenv.Start()
	if err != nil {
		return nil, err
	}
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		return nil, err
	}
	opts := env.ManagerOptions(operator.ManagerOptions())
	opts.Controller.SkipNameValidation = ptr.To(true) // one manager per benchmark, in one process
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		return nil, err
	}
	op, err := operator.Setup(ctx, mgr, operator.Options{EnableWebhooks: true})
	if err != nil {
		return nil, err
	}
	go func() { _ = mgr.Start(ctx) }()
	if err := env.WaitForWebhook(ctx); err != nil {
		return nil, err
	}
	for i := range fleetSize {
		mc := &unstructured.Unstructured{}
		mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
		mc.SetKind("ManagedCluster")
		mc.SetName(fmt.Sprintf("cluster-%04d", i))
		mc.SetLabels(map[string]string{"env": []string{"prod", "dev"}[i%2], "shard": fmt.Sprint(i % 10)})
		if err := c.Create(ctx, mc); err != nil {
			return nil, err
		}
	}
	p := &v1alpha1.CleanupPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet"},
		Spec: v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
			RemoveStrategy:  v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		},
	}
	if err := c.Create(ctx, p); err != nil {
		return nil, err
	}
	start := time.Now()
	waitMatched(ctx, b, c, 1, fleetSize/2)
	b.Logf("first generation: ready on %d clusters in %s, %d compilation(s), %d evaluation(s)",
		fleetSize, time.Since(start), op.Cache.Compilations(), op.Governance.Evaluations())
	return &fixture{client: c, op: op, policy: p}, nil
}

func waitMatched(ctx context.Context, b *testing.B, c client.Client, generation int64, want int32) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var p v1alpha1.CleanupPolicy
		if err := c.Get(ctx, client.ObjectKey{Name: "fleet"}, &p); err != nil {
			b.Fatal(err)
		}
		if p.Status.ObservedGeneration >= generation && p.Status.MatchedClusters == want &&
			meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ReadyCondition) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("generation %d did not match %d clusters in time", generation, want)
}
