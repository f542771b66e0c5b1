package cel_test

import (
	"context"
	"fmt"
	"math"
	"strings"
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

// BenchmarkEvalOrphaningRule evaluates an orphaning rule on one manifest of a
// ManifestWork, as the orphaning decision does: the cluster and the work
// bound once, the manifest bound for each evaluation. The manifest is the
// ConfigMap the fleet benchmark uses, with 512 bytes of data.
func BenchmarkEvalOrphaningRule(b *testing.B) {
	p, errs := cel.Compile(typedEnv(b), policy(func(s *v1alpha1.CleanupPolicySpec) {
		s.Orphaning = []v1alpha1.OrphaningRule{{Name: "keep", When: "manifest.kind == 'CustomResourceDefinition' || " +
			"(has(manifest.metadata.annotations) && manifest.metadata.annotations[?'cleanup.fleetops.dev/orphan'].orValue('') == 'true') || " +
			"work.metadata.labels[?'legacy'].orValue('') == 'true'"}}
	}))
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	work := map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1",
		"kind":       "ManifestWork",
		"metadata":   map[string]any{"name": "w-0001", "namespace": "bench", "labels": map[string]any{"app": "bench"}},
	}
	manifest := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": "cm-0001", "namespace": "default"},
		"data":       map[string]any{"payload": strings.Repeat("x", 512)},
	}
	wa := p.Bind(context.Background(), cel.NewBudget(math.MaxInt64), cluster("bench", map[string]any{"env": "prod"})).With(cel.VarWork, work)
	b.ReportAllocs()
	for b.Loop() {
		ok, err := p.Orphaning[0].Bool(wa.With(cel.VarManifest, manifest))
		if err != nil || ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkEvalStageWhen evaluates a deletion stage's when on one object of
// the cluster namespace, known by its metadata, as the stage assignment
// does: the cluster bound once, the object for each evaluation.
func BenchmarkEvalStageWhen(b *testing.B) {
	p, errs := cel.Compile(typedEnv(b), policy(func(s *v1alpha1.CleanupPolicySpec) {
		s.DeletionStages = []v1alpha1.DeletionStage{{Name: "workloads", GroupVersionResource: gvr("manifestworks"),
			When: "!object.metadata.name.endsWith('-klusterlet') && object.metadata.labels[?'tier'].orValue('') != 'keep'"}}
	}))
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	obj := map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1",
		"kind":       "ManifestWork",
		"metadata": map[string]any{
			"name": "w-0001", "namespace": "bench", "uid": "0b9a1d3e-5c47-4f0e-9d0b-1f6f1c2a9e11", "resourceVersion": "12345",
			"labels":      map[string]any{"app": "bench"},
			"annotations": map[string]any{"note": "x"},
			"finalizers":  []any{"cluster.open-cluster-management.io/manifest-work-cleanup"},
		},
	}
	a := p.Bind(context.Background(), cel.NewBudget(math.MaxInt64), cluster("bench", map[string]any{"env": "prod"}))
	b.ReportAllocs()
	for b.Loop() {
		ok, err := p.StageWhen[0].Bool(a.With(cel.VarObject, obj))
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkEvalPruneRule evaluates a prune rule on one ConfigurationPolicy,
// as the prune decision does: the cluster bound once, the policy for each
// evaluation.
func BenchmarkEvalPruneRule(b *testing.B) {
	p, errs := cel.Compile(typedEnv(b), policy(func(s *v1alpha1.CleanupPolicySpec) {
		s.Prune = &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{{Behavior: v1alpha1.PruneDeleteAll,
			When: "policy.metadata.labels[?'cleanup'].orValue('') == 'strict' || policy.spec.remediationAction == 'enforce'"}}}
	}))
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	cp := map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1",
		"kind":       "ConfigurationPolicy",
		"metadata":   map[string]any{"name": "require-labels", "namespace": "bench", "labels": map[string]any{"app": "bench"}},
		"spec": map[string]any{"remediationAction": "enforce", "severity": "low", "object-templates": []any{
			map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "x"}}},
		}},
	}
	a := p.Bind(context.Background(), cel.NewBudget(math.MaxInt64), cluster("bench", map[string]any{"env": "prod"}))
	b.ReportAllocs()
	for b.Loop() {
		ok, err := p.PruneRules[0].Bool(a.With(cel.VarPolicy, cp))
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
