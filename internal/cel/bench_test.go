package cel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// BenchmarkCompile compiles the contract's example policy: every field, 12
// expressions, typed against the real CRD schemas.
func BenchmarkCompile(b *testing.B) {
	env := typedEnv(b)
	p := examplePolicy()
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := cel.Compile(env, p); len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
	}
}

// BenchmarkNewEnv builds the environment from the schemas, once per process.
func BenchmarkNewEnv(b *testing.B) {
	typedEnv(b)
	crdEnv := func() cel.Schemas {
		s, err := cel.SchemasFromCRDs(mustCRDs(b))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cel.NewEnv(crdEnv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelector evaluates a typical selector on one ManagedCluster.
func BenchmarkSelector(b *testing.B) {
	p, errs := cel.Compile(typedEnv(b), policy(func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.metadata.labels[?'env'].orValue('') == 'prod' && " +
			"cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable' && c.status == 'True')"
	}))
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	c := cluster("bench", map[string]any{"env": "prod", "region": "eu-west-1", "tier": "gold"})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		budget := cel.NewBudget(cel.ReconcileCostBudget)
		ok, err := p.ClusterSelector.Bool(p.Bind(ctx, budget, c))
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkFleetThroughCache evaluates one policy on 1,000 clusters per
// iteration, fetching the compiled policy from the cache for each cluster as
// a reconciler does, and reports the compilations: one per generation.
func BenchmarkFleetThroughCache(b *testing.B) {
	cache := cel.NewCache(typedEnv(b))
	p := examplePolicy()
	clusters := make([]map[string]any, 1000)
	for i := range clusters {
		env := "dev"
		if i%2 == 0 {
			env = "prod"
		}
		clusters[i] = cluster(fmt.Sprintf("c%04d", i), map[string]any{"env": env})
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		budget := cel.NewBudget(cel.ReconcileCostBudget)
		matched := 0
		for _, c := range clusters {
			compiled, errs := cache.Get(p)
			if len(errs) > 0 {
				b.Fatal(errs.ToAggregate())
			}
			ok, err := compiled.ClusterSelector.Bool(compiled.Bind(ctx, budget, c))
			if err != nil {
				b.Fatal(err)
			}
			if ok {
				matched++
			}
		}
		if matched != 500 {
			b.Fatalf("matched %d, want 500", matched)
		}
	}
	b.ReportMetric(float64(cache.Compilations()), "compilations")
}
