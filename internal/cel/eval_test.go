package cel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

func cluster(name string, labels map[string]any) map[string]any {
	md := map[string]any{"name": name}
	if labels != nil {
		md["labels"] = labels
	}
	return map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1",
		"kind":       "ManagedCluster",
		"metadata":   md,
		"spec":       map[string]any{"hubAcceptsClient": true},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "x", "message": "x", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}},
	}
}

func mustCompile(t *testing.T, edit func(s *v1alpha1.CleanupPolicySpec)) *cel.Policy {
	t.Helper()
	p, errs := cel.Compile(typedEnv(t), policy(edit))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return p
}

func TestSelector(t *testing.T) {
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.metadata.labels[?'env'].orValue('') == 'prod' && cluster.spec.hubAcceptsClient && " +
			"cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable' && c.status == 'True')"
	})
	budget := cel.NewBudget(cel.ReconcileCostBudget)
	cases := map[string]struct {
		cluster map[string]any
		want    bool
	}{
		"matching label":     {cluster("a", map[string]any{"env": "prod"}), true},
		"other label":        {cluster("b", map[string]any{"env": "dev"}), false},
		"no labels at all":   {cluster("c", nil), false},
		"labels but not env": {cluster("d", map[string]any{"tier": "x"}), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := p.ClusterSelector.Bool(p.Bind(context.Background(), budget, tc.cluster))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("selector = %v, want %v", got, tc.want)
			}
		})
	}
	if budget.Remaining() >= cel.ReconcileCostBudget {
		t.Fatal("evaluation spent nothing from the budget")
	}
}

func TestRuntimeErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(s *v1alpha1.CleanupPolicySpec)
		eval    func(p *cel.Policy, a *cel.Activation) (bool, error)
		path    string
		message string
	}{
		{
			name: "missing key",
			edit: func(s *v1alpha1.CleanupPolicySpec) { s.ClusterSelector = "cluster.metadata.labels['env'] == 'prod'" },
			eval: func(p *cel.Policy, a *cel.Activation) (bool, error) { return p.ClusterSelector.Bool(a) },
			path: "spec.clusterSelector", message: "no such key: env",
		},
		{
			name: "division by zero",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.ClusterSelector = "10 / (size(cluster.metadata.labels) - 1) > 0"
			},
			eval: func(p *cel.Policy, a *cel.Activation) (bool, error) { return p.ClusterSelector.Bool(a) },
			path: "spec.clusterSelector", message: "division by zero",
		},
		{
			name: "failing variable names the variable",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Variables = []v1alpha1.Variable{{Name: "owner", Expression: "cluster.metadata.labels['owner']"}}
				s.RemoveStrategy.Rules = []v1alpha1.StrategyRule{{When: "variables.owner == 'team-a'", Strategy: v1alpha1.RemoveStrategyNeedless}}
			},
			eval: func(p *cel.Policy, a *cel.Activation) (bool, error) { return p.StrategyRules[0].Bool(a) },
			path: "spec.variables[0].expression", message: "no such key: owner",
		},
		{
			name: "dynamic value of the wrong type",
			edit: func(s *v1alpha1.CleanupPolicySpec) {
				s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: "manifest.metadata.name"}}
			},
			eval: func(p *cel.Policy, a *cel.Activation) (bool, error) {
				return p.Orphaning[0].Bool(a.With(cel.VarManifest, map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}}))
			},
			path: "spec.orphaning[0].when", message: "must evaluate to bool",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.edit)
			a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), cluster("a", map[string]any{"tier": "gold"}))
			got, err := tc.eval(p, a)
			var evalErr *cel.EvalError
			if !errors.As(err, &evalErr) {
				t.Fatalf("got %v, %v; want an *EvalError", got, err)
			}
			if evalErr.Path != tc.path || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q on %s; want %q on %s", err, evalErr.Path, tc.message, tc.path)
			}
			if got {
				t.Fatal("a failed evaluation returned true")
			}
		})
	}
}

func TestBudgetExhaustion(t *testing.T) {
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.metadata.labels.all(k, k.startsWith('a'))"
	})
	labels := map[string]any{}
	for _, k := range []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"} {
		labels[k] = "v"
	}
	budget := cel.NewBudget(20)
	a := p.Bind(context.Background(), budget, cluster("a", labels))
	var err error
	for range 10 {
		if _, err = p.ClusterSelector.Bool(a); err != nil {
			break
		}
	}
	if !errors.Is(err, cel.ErrBudgetExhausted) || !cel.Transient(err) {
		t.Fatalf("got %v, want the budget exhausted", err)
	}
}

func TestPerCallCostLimit(t *testing.T) {
	// Six scans of a 2,000,000-character string: within the compile-time
	// bound, over the per-call limit at run time.
	clauses := make([]string, 6)
	for i := range clauses {
		clauses[i] = fmt.Sprintf("manifest.data.s.contains('%c')", 'b'+i)
	}
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: strings.Join(clauses, " || ")}}
	})
	a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), cluster("a", nil)).
		With(cel.VarManifest, map[string]any{"kind": "X", "data": map[string]any{"s": strings.Repeat("a", 2_000_000)}})
	_, err := p.Orphaning[0].Bool(a)
	if err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Fatalf("got %v, want the per-call cost limit exceeded", err)
	}
	if cel.Transient(err) {
		t.Fatal("the cost limit is a property of the object, not transient")
	}
}

func TestSlowEvaluationIsInterrupted(t *testing.T) {
	// Iterating a huge list is cheap by cost but slow in the interpreter's
	// cost tracking; the per-call time limit stops it.
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: "manifest.data.items.all(x, x >= 0)"}}
	})
	items := make([]any, 1_000_000)
	for i := range items {
		items[i] = int64(i)
	}
	a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), cluster("a", nil)).
		With(cel.VarManifest, map[string]any{"kind": "X", "data": map[string]any{"items": items}})
	_, err := p.Orphaning[0].Bool(a)
	var evalErr *cel.EvalError
	if !errors.As(err, &evalErr) || evalErr.Path != "spec.orphaning[0].when" {
		t.Fatalf("got %v, want the evaluation interrupted", err)
	}
	if !cel.Transient(err) {
		t.Fatalf("an interrupted evaluation must be transient: %v", err)
	}
}

func TestScopes(t *testing.T) {
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.Variables = []v1alpha1.Variable{{Name: "tier", Expression: "cluster.metadata.labels[?'tier'].orValue('standard')"}}
		s.RemoveStrategy.Rules = []v1alpha1.StrategyRule{{When: "variables.tier == 'sandbox'", Strategy: v1alpha1.RemoveStrategyNeedless}}
		s.KeepNamespace = "namespace.metadata.labels[?'keep'].orValue('') == 'true' && namespace.metadata.name == cluster.metadata.name"
		s.DeletionStages = []v1alpha1.DeletionStage{{Name: "w", GroupVersionResource: gvr("manifestworks"), When: "!object.metadata.name.endsWith('-klusterlet')"}}
		s.Orphaning = []v1alpha1.OrphaningRule{{Name: "crd", When: "manifest.kind == 'CustomResourceDefinition' && work.metadata.namespace == cluster.metadata.name"}}
		s.Prune = &v1alpha1.Prune{Rules: []v1alpha1.PruneRule{
			{When: "cluster != null && variables.tier == 'sandbox'", Behavior: v1alpha1.PruneDeleteAll},
			{When: "policy.spec.remediationAction.lowerAscii() == 'enforce' && size(policy.spec.object__dash__templates) > 0", Behavior: v1alpha1.PruneDeleteIfCreated},
		}}
	})
	ctx := context.Background()
	a := p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), cluster("c1", map[string]any{"tier": "sandbox"}))
	check := func(name string, got bool, err error, want bool) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != want {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
	}
	got, err := p.StrategyRules[0].Bool(a)
	check("strategy rule", got, err, true)

	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "c1", "labels": map[string]any{"keep": "true"}}}
	got, err = p.KeepNamespace.Bool(a.With(cel.VarNamespace, ns))
	check("keepNamespace", got, err, true)

	got, err = p.StageWhen[0].Bool(a.With(cel.VarObject, map[string]any{"metadata": map[string]any{"name": "c1-klusterlet"}}))
	check("stage filter", got, err, false)

	work := map[string]any{"metadata": map[string]any{"name": "w", "namespace": "c1"}}
	crd := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "foos.example.com"}}
	got, err = p.Orphaning[0].Bool(a.With(cel.VarWork, work).With(cel.VarManifest, crd))
	check("orphaning rule", got, err, true)

	got, err = p.PruneRules[0].Bool(a)
	check("prune rule with a cluster", got, err, true)

	standalone := p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), nil)
	got, err = p.PruneRules[0].Bool(standalone)
	check("prune rule without a cluster", got, err, false)

	cp := map[string]any{"metadata": map[string]any{"name": "cp"}, "spec": map[string]any{
		"remediationAction": "Enforce",
		"object-templates":  []any{map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{"kind": "Pod"}}},
	}}
	got, err = p.PruneRules[1].Bool(standalone.With(cel.VarPolicy, cp))
	check("prune rule over a hyphenated field", got, err, true)
}

func TestCacheCompilesOncePerGeneration(t *testing.T) {
	cache := cel.NewCache(typedEnv(t))
	p := examplePolicy()
	for range 1000 {
		if _, errs := cache.Get(p); len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
	}
	if n := cache.Compilations(); n != 1 {
		t.Fatalf("%d compilations for one generation, want 1", n)
	}

	broken := p.DeepCopy()
	broken.Generation = 2
	broken.Spec.ClusterSelector = "cluster.metadata.lables['x'] == 'y'"
	for range 3 {
		if compiled, errs := cache.Get(broken); compiled != nil || len(errs) == 0 {
			t.Fatal("a broken generation compiled")
		}
	}
	if n := cache.Compilations(); n != 2 {
		t.Fatalf("%d compilations after a broken generation, want 2: errors must be cached too", n)
	}

	fixed := p.DeepCopy()
	fixed.Generation = 3
	if compiled, errs := cache.Get(fixed); compiled == nil || len(errs) > 0 {
		t.Fatalf("the fixed generation did not compile: %v", errs)
	}
	cache.Retain(nil)
	if cache.Len() != 0 {
		t.Fatal("evicted policy still cached")
	}
}

func TestCancelledReconcileEvaluatesNothing(t *testing.T) {
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.metadata.labels[?'env'].orValue('') == 'prod'"
		s.RemoveStrategy.Rules = []v1alpha1.StrategyRule{{When: "cluster.metadata.labels.exists(k, k == 'env')", Strategy: v1alpha1.RemoveStrategyNeedless}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), cluster("a", map[string]any{"env": "prod"}))
	for name, e := range map[string]*cel.Expression{"selector": p.ClusterSelector, "rule with a comprehension": p.StrategyRules[0]} {
		got, err := e.Bool(a)
		var evalErr *cel.EvalError
		if !errors.As(err, &evalErr) || !errors.Is(err, context.Canceled) || !cel.Transient(err) || got {
			t.Fatalf("%s: got %v, %v; want a transient EvalError", name, got, err)
		}
	}
}

func TestConcurrentEvaluations(t *testing.T) {
	// One compiled policy serves every reconcile at once: its shared parts
	// (the empty variables, the schemas, the deadlines) must bear it.
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.metadata.labels[?'env'].orValue('') == 'prod' && " +
			"cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable' && c.status == 'True')"
	})
	c := cluster("a", map[string]any{"env": "prod"})
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for range 200 {
				var ok bool
				if ok, err = p.ClusterSelector.Bool(p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), c)); err == nil && !ok {
					err = errors.New("selector false")
				}
				if err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
