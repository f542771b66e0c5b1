package cel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// oddClusters are ManagedClusters with the values an evaluation may get
// wrong: none at all, no labels, null or non-map labels and annotations, non-string
// label values, a huge label map, no metadata, odd conditions.
func oddClusters() map[string]map[string]any {
	huge := map[string]any{}
	for i := range 10_000 {
		huge[fmt.Sprintf("k%05d", i)] = fmt.Sprintf("v%d", i)
	}
	huge["env"] = "prod"
	out := map[string]map[string]any{
		"labelled":       cluster("a", map[string]any{"env": "prod", "tier": "gold"}),
		"other env":      cluster("b", map[string]any{"env": "dev"}),
		"no labels":      cluster("c", nil),
		"empty labels":   cluster("d", map[string]any{}),
		"huge labels":    cluster("e", huge),
		"unicode":        cluster("ü-ñ", map[string]any{"env": "prödüction-" + strings.Repeat("é", 300)}),
		"long name":      cluster(strings.Repeat("n", 5000)+"-klusterlet", map[string]any{"env": "prod"}),
		"escaped keys":   cluster("f", map[string]any{"a.b/c": "x", "env": "prod", "__x__": "y"}),
		"empty env":      cluster("g", map[string]any{"env": ""}),
		"non-string env": cluster("h", map[string]any{"env": int64(1), "flag": true, "nested": map[string]any{"x": "y"}, "null": nil}),
		// No ManagedCluster (a standalone ConfigurationPolicy): null.
		"no cluster": nil,
	}
	set := func(name string, edit func(c map[string]any)) {
		c := cluster(name, map[string]any{"env": "prod"})
		edit(c)
		out[name] = c
	}
	md := func(c map[string]any) map[string]any { return c["metadata"].(map[string]any) }
	status := func(c map[string]any) map[string]any { return c["status"].(map[string]any) }
	set("null labels", func(c map[string]any) { md(c)["labels"] = nil })
	set("null annotations", func(c map[string]any) { md(c)["annotations"] = nil })
	set("string labels", func(c map[string]any) { md(c)["labels"] = "env=prod" })
	set("annotated", func(c map[string]any) {
		md(c)["annotations"] = map[string]any{"cleanup.fleetops.dev/orphan": "true", "note": ""}
	})
	set("no metadata", func(c map[string]any) { delete(c, "metadata") })
	set("null metadata", func(c map[string]any) { c["metadata"] = nil })
	set("string metadata", func(c map[string]any) { c["metadata"] = "x" })
	set("no status", func(c map[string]any) { delete(c, "status") })
	set("null conditions", func(c map[string]any) { status(c)["conditions"] = nil })
	set("empty conditions", func(c map[string]any) { status(c)["conditions"] = []any{} })
	set("map conditions", func(c map[string]any) { status(c)["conditions"] = map[string]any{"type": "x"} })
	set("odd conditions", func(c map[string]any) {
		status(c)["conditions"] = []any{
			"not an object", nil,
			map[string]any{"type": int64(3), "status": true},
			map[string]any{"status": "True"},
			map[string]any{"type": "ManagedClusterConditionAvailable", "status": "True"},
		}
	})
	set("many conditions", func(c map[string]any) {
		var conds []any
		for i := range 2000 {
			conds = append(conds, map[string]any{"type": fmt.Sprintf("T%d", i), "status": "False"})
		}
		conds = append(conds, map[string]any{"type": "ManagedClusterConditionAvailable", "status": "True"})
		status(c)["conditions"] = conds
	})
	set("unavailable", func(c map[string]any) {
		status(c)["conditions"] = []any{map[string]any{"type": "ManagedClusterConditionAvailable", "status": "False"}}
	})
	set("null spec", func(c map[string]any) { c["spec"] = nil })
	set("string accept", func(c map[string]any) { c["spec"] = map[string]any{"hubAcceptsClient": "yes"} })
	return out
}

// oddManifests are manifests of a work, dynamic: anything a work may carry.
func oddManifests() map[string]map[string]any {
	return map[string]map[string]any{
		"configmap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "default"},
			"data": map[string]any{"payload": strings.Repeat("x", 512)}},
		"crd": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "x.example.com"}},
		"orphan": {"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s",
			"annotations": map[string]any{"cleanup.fleetops.dev/orphan": "true"}, "labels": map[string]any{"tier": "keep"}}},
		"null annotations":    {"kind": "Secret", "metadata": map[string]any{"name": "s", "annotations": nil, "labels": nil}},
		"non-string kind":     {"kind": int64(7), "metadata": map[string]any{"name": true}},
		"no metadata":         {"kind": "Pod"},
		"string metadata":     {"kind": "Pod", "metadata": "x"},
		"non-string annotate": {"kind": "Pod", "metadata": map[string]any{"annotations": map[string]any{"cleanup.fleetops.dev/orphan": true}}},
		"empty":               {},
		"empty data":          {"kind": "ConfigMap", "metadata": map[string]any{"name": ""}, "data": map[string]any{}},
	}
}

// corpus are selectors and rules of every shape policies use, and some
// that are tracked: dynamic values, comprehensions, calls.
var corpus = map[cel.Scope][]string{
	cel.ScopeSelector: {
		"cluster.metadata.labels[?'env'].orValue('') == 'prod' && cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable' && c.status == 'True')",
		"cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		"cluster.metadata.labels[?'env'].orValue('prod') != 'prod'",
		"cluster.metadata.?labels.orValue({}) == {}",
		"cluster.metadata.labels['env'] == 'prod'",
		"cluster.metadata.labels.env == 'prod'",
		"'prod' == cluster.metadata.labels.env",
		"cluster.metadata.labels[?'nested'].orValue('') == 'x'",
		"cluster.metadata.labels[?'null'].orValue('') == ''",
		"cluster.metadata.labels[?'a.b/c'].orValue('') == 'x'",
		"cluster.metadata.labels[?'__x__'].orValue('') == 'y'",
		"cluster.metadata.?labels.?env.orValue('') == 'prod'",
		"cluster.?spec.?hubAcceptsClient.orValue(false)",
		"cluster.metadata.labels[?'env'].orValue('') == 'prod' && cluster.?spec.?hubAcceptsClient.orValue(false)",
		"cluster.?status.?version.?kubernetes.orValue('') == ''",
		"cluster.metadata.?labels[?'env'].orValue('') == 'prod'",
		"has(cluster.metadata.labels)", "has(cluster.metadata.labels.env)", "has(cluster.metadata.annotations)",
		"has(cluster.metadata)", "has(cluster.status.conditions)", "has(cluster.spec.hubAcceptsClient)",
		"!has(cluster.metadata.labels.env) || cluster.metadata.labels.env == 'prod'",
		"cluster.metadata.name == 'a'", "cluster.metadata.name != 'a'",
		"cluster.metadata.name.startsWith('a') || cluster.metadata.name.endsWith('-klusterlet')",
		"!cluster.metadata.name.endsWith('-klusterlet')",
		"cluster.metadata.name.contains('ñ')", "'abc'.contains(cluster.metadata.name)", "'a'.startsWith(cluster.metadata.name)",
		"cluster.metadata.labels.env.startsWith('pr')",
		"cluster.spec.hubAcceptsClient", "cluster.spec.hubAcceptsClient == true", "!cluster.spec.hubAcceptsClient",
		"cluster.spec.hubAcceptsClient && cluster.metadata.labels.env == 'prod'",
		"cluster.metadata.labels.env == 'prod' && cluster.spec.hubAcceptsClient || cluster.metadata.name == 'c'",
		"cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable')",
		"cluster.status.conditions.exists(c, c.status == 'True') && cluster.status.conditions.all(c, c.type != '')",
		"cluster.status.conditions.all(c, c.status == 'False')",
		"cluster.status.conditions.all(c, has(c.type))",
		"cluster.status.conditions.exists(c, c.type.startsWith('T1'))",
		"cluster.status.conditions.exists(c, c.type == cluster.metadata.name)",
		"cluster.status.conditions.exists_one(c, c.type == 'ManagedClusterConditionAvailable')",
		"cluster.status.conditions.exists(c, true)",
		"size(cluster.metadata.labels) > 0",
		"cluster.metadata.labels.env in ['prod', 'dev']",
		"'env' in cluster.metadata.labels",
		"cluster.metadata.name.matches('^a')",
		"cluster.status.conditions[0].type == 'x'",
		"dyn(cluster.metadata).name == 'a'",
		"cluster.metadata.labels[?'env'].orValue('') == 'prod' == true",
		"cluster.metadata.name == 'a' || true",
		"cluster != null && cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		"cluster.metadata != null", "null == cluster.status",
		"cluster.status.conditions.exists(c, c != null && c.type == 'x')",
	},
	cel.ScopeManifest: {
		"manifest.kind == 'CustomResourceDefinition' || (has(manifest.metadata.annotations) && manifest.metadata.annotations[?'cleanup.fleetops.dev/orphan'].orValue('') == 'true') || work.metadata.labels[?'legacy'].orValue('') == 'true'",
		"manifest.kind == 'ConfigMap'", "manifest.kind != 'Secret'", "manifest.metadata.name == 'cm'",
		"manifest.metadata.?annotations.orValue({}) == {}",
		"has(manifest.metadata) && has(manifest.metadata.labels) && manifest.metadata.labels[?'tier'].orValue('') == 'keep'",
		"manifest.metadata.annotations['cleanup.fleetops.dev/orphan'] == 'true'",
		"manifest.?metadata.?name.orValue('') == 'cm'",
		"manifest.kind.startsWith('Config')", "manifest.data.payload.contains('xx')",
		"manifest.kind == 7", "manifest.kind == 7.0", "manifest.metadata.name == true",
		"manifest.metadata.annotations[?'cleanup.fleetops.dev/orphan'].orValue(false) == true",
		"manifest.metadata.?labels.?tier.orValue(1) == 1", "manifest.metadata.name.endsWith('s')",
		"work.metadata.namespace == cluster.metadata.name",
		"manifest.apiVersion == 'v1' && manifest.kind == 'Secret'",
		"manifest.status == null", "manifest.metadata.annotations != null", "manifest.data != null", "work != null && manifest != null",
		"manifest.metadata.name != null", "null == manifest.data", "manifest.metadata.name == null || manifest.kind == null",
	},
	cel.ScopeObject: {
		"!object.metadata.name.endsWith('-klusterlet') && object.metadata.labels[?'tier'].orValue('') != 'keep'",
		"object.metadata.finalizers.exists(f, f.startsWith('cluster.'))",
		"has(object.metadata.labels) && object.metadata.labels.tier == 'keep'",
		"object.metadata.namespace == cluster.metadata.name",
	},
}

func bindFor(scope cel.Scope, a *cel.Activation, manifest map[string]any) *cel.Activation {
	switch scope {
	case cel.ScopeManifest:
		work := map[string]any{"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "w", "namespace": "a", "labels": map[string]any{"legacy": "true"}}}
		return a.With(cel.VarWork, work).With(cel.VarManifest, manifest)
	case cel.ScopeObject:
		md, _ := manifest["metadata"].(map[string]any)
		obj := map[string]any{"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork", "metadata": md}
		if md != nil {
			obj["metadata"] = map[string]any{"name": md["name"], "namespace": "a", "labels": md["labels"],
				"finalizers": []any{"cluster.open-cluster-management.io/manifest-work-cleanup"}}
		}
		return a.With(cel.VarObject, obj)
	}
	return a
}

func compileIn(t testing.TB, scope cel.Scope, src string) *cel.Expression {
	t.Helper()
	e, err := tryCompileIn(t, scope, src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return e
}

func tryCompileIn(t testing.TB, scope cel.Scope, src string) (*cel.Expression, error) {
	t.Helper()
	p, errs := cel.Compile(typedEnv(t), policy(func(s *v1alpha1.CleanupPolicySpec) {
		switch scope {
		case cel.ScopeSelector:
			s.ClusterSelector = src
		case cel.ScopeManifest:
			s.Orphaning = []v1alpha1.OrphaningRule{{Name: "r", When: src}}
		case cel.ScopeObject:
			s.DeletionStages = []v1alpha1.DeletionStage{{Name: "s", GroupVersionResource: gvr("manifestworks"), When: src}}
		}
	}))
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	switch scope {
	case cel.ScopeManifest:
		return p.Orphaning[0], nil
	case cel.ScopeObject:
		return p.StageWhen[0], nil
	}
	return p.ClusterSelector, nil
}

// TestUntrackedMatchesTracked evaluates the corpus on odd objects with the
// untracked program and with the tracked one: where an expression has an
// untracked program, both fail with the same error or return the same
// value, and the tracked cost is within the estimate the untracked
// evaluation is charged.
func TestUntrackedMatchesTracked(t *testing.T) {
	ctx := context.Background()
	untracked, total := 0, 0
	for scope, exprs := range corpus {
		for _, src := range exprs {
			e := compileIn(t, scope, src)
			total++
			if !e.Untracked() {
				continue
			}
			untracked++
			p, _ := cel.Compile(typedEnv(t), policy(nil))
			for cname, c := range oddClusters() {
				for mname, m := range oddManifests() {
					if scope == cel.ScopeSelector && mname != "configmap" {
						continue
					}
					a := bindFor(scope, p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), c), m)
					checkUntracked(t, e, src, a, cname+"/"+mname)
				}
			}
		}
	}
	// Most of the corpus is typed: a change that tracked everything
	// would pass the comparisons.
	if untracked*2 < total {
		t.Fatalf("%d of %d expressions untracked", untracked, total)
	}
	t.Logf("%d of %d expressions untracked", untracked, total)
}

// checkUntracked compares the untracked program with the tracked one on
// one evaluation.
func checkUntracked(t *testing.T, e *cel.Expression, src string, a *cel.Activation, obj string) {
	t.Helper()
	val, charge, err := e.EvalUntracked(a)
	tval, cost, terr := e.EvalTracked(a)
	switch {
	case cel.Transient(err) || cel.Transient(terr):
		// Interrupted for time on a loaded machine: another run may not be.
	case (err == nil) != (terr == nil) || err != nil && err.Error() != terr.Error():
		t.Fatalf("%s on %s: untracked error %v, tracked %v", src, obj, err, terr)
	case err == nil && !sameType(val, tval):
		t.Fatalf("%s on %s: untracked %v, tracked %v", src, obj, val, tval)
	case cost > charge:
		t.Fatalf("%s on %s: tracked cost %d, over the estimate %d it is charged", src, obj, cost, charge)
	case charge > cel.PerCallCostLimit:
		t.Fatalf("%s: untracked with an estimate of %d, over the per-call limit", src, charge)
	}
}

func sameType(a, b ref.Val) bool {
	if a.Type() != b.Type() {
		return false
	}
	return a.Equal(b) == types.True
}

// TestUntrackedCovers holds the expressions of the benchmarks, and the
// shapes most policies use, to untracked programs, and keeps tracked what
// the estimate does not bound: a change either way fails here, not only in
// a benchmark or on a cluster.
func TestUntrackedCovers(t *testing.T) {
	in := map[cel.Scope][]string{
		cel.ScopeSelector: {corpus[cel.ScopeSelector][0], "has(cluster.metadata.labels.env)", "!cluster.metadata.name.endsWith('-x')",
			"cluster.status.conditions.all(c, c.status == 'True')", "cluster.metadata.labels['env'] != 'x'",
			"cluster.metadata.labels[?'env'].orValue('') == 'prod' && cluster.?spec.?hubAcceptsClient.orValue(false)",
			"cluster != null && cluster.metadata.labels[?'env'].orValue('') == 'dev'",
			"size(cluster.metadata.labels) > 0", "cluster.metadata.name.matches('^a')"},
		cel.ScopeManifest: {"work.metadata.labels[?'legacy'].orValue('') == 'true'"},
		cel.ScopeObject:   {corpus[cel.ScopeObject][0]},
	}
	for scope, exprs := range in {
		for _, src := range exprs {
			if !compileIn(t, scope, src).Untracked() {
				t.Errorf("%s: tracked", src)
			}
		}
	}
	out := map[cel.Scope][]string{
		// Dynamic: the estimator charges no selection on it.
		cel.ScopeManifest: {corpus[cel.ScopeManifest][0], "manifest.kind == 'ConfigMap'"},
		cel.ScopeSelector: {"dyn(cluster.metadata).name == 'a'",
			// A field of an optional: the estimator charges no selection on it.
			"optional.of(cluster.metadata).name.orValue('') == 'a'",
			// A list built from a string: '' split is estimated empty, and is [''].
			"cluster.metadata.name.split('-').size() > 1",
			// Estimated over the per-call limit.
			sixScans("cluster.metadata.annotations['a']")},
	}
	for scope, exprs := range out {
		for _, src := range exprs {
			if compileIn(t, scope, src).Untracked() {
				t.Errorf("%s: untracked, yet its estimate does not bound it", src)
			}
		}
	}
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.Variables = []v1alpha1.Variable{{Name: "env", Expression: "cluster.metadata.labels[?'env'].orValue('')"}}
		s.RemoveStrategy.Rules = []v1alpha1.StrategyRule{{When: "variables.env == 'prod'", Strategy: v1alpha1.RemoveStrategyNeedless}}
	})
	if !p.Variables[0].Untracked() || p.StrategyRules[0].Untracked() {
		t.Error("a variable's expression is untracked where it reads only the cluster; one that reads variables is tracked")
	}
}

// sixScans is six scans of the string s, each for another letter.
func sixScans(s string) string {
	clauses := make([]string, 6)
	for i := range clauses {
		clauses[i] = fmt.Sprintf("%s.contains('%c')", s, 'b'+i)
	}
	return strings.Join(clauses, " || ")
}

// TestTypedPerCallCostLimit: an expression on a typed object estimated
// over the per-call limit is tracked, and stopped there.
func TestTypedPerCallCostLimit(t *testing.T) {
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = sixScans("cluster.metadata.annotations['a']")
	})
	c := cluster("a", nil)
	c["metadata"].(map[string]any)["annotations"] = map[string]any{"a": strings.Repeat("a", 2_000_000)}
	_, err := p.ClusterSelector.Bool(p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), c))
	if err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Fatalf("got %v, want the per-call cost limit exceeded", err)
	}
}

// TestEstimatesLeaveAReserve: untracked evaluations are charged their
// estimate while the budget holds it beyond half of it; then the tracked
// program charges what each costs, until the budget runs out.
func TestEstimatesLeaveAReserve(t *testing.T) {
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable')"
	})
	sel := p.ClusterSelector
	if !sel.Untracked() {
		t.Fatal("the selector is tracked")
	}
	_, estimate, _ := sel.EvalUntracked(p.Bind(context.Background(), cel.NewBudget(1), cluster("a", nil)))
	_, actual, _ := sel.EvalTracked(p.Bind(context.Background(), cel.NewBudget(1), cluster("a", nil)))
	if actual == 0 || actual >= estimate {
		t.Fatalf("cost %d, estimate %d: the test needs an estimate over the cost", actual, estimate)
	}
	// Room for two estimates beyond the reserve, and a little more.
	total := int64(4*estimate + 10)
	budget := cel.NewBudget(total)
	a := p.Bind(context.Background(), budget, cluster("a", nil))
	var charged []uint64
	var err error
	for range 100_000 {
		var cost uint64
		if _, cost, err = sel.EvalCost(a); err != nil {
			break
		}
		charged = append(charged, cost)
	}
	if !errors.Is(err, cel.ErrBudgetExhausted) {
		t.Fatalf("got %v, want the budget exhausted", err)
	}
	if len(charged) < 3 || charged[0] != estimate || charged[1] != estimate || charged[2] != actual {
		t.Fatalf("charged %v, want the estimate %d twice, then the cost %d", charged[:min(len(charged), 4)], estimate, actual)
	}
	if want := 2 + (total-2*int64(estimate))/int64(actual); int64(len(charged)) < want-1 {
		t.Fatalf("%d evaluations before the budget ran out, want about %d: the reserve is for what evaluations cost", len(charged), want)
	}
}

// TestUntrackedComprehensionInterrupted: an untracked comprehension checks
// for interruption, so evaluations bound it in time as they bound a
// tracked one.
func TestUntrackedComprehensionInterrupted(t *testing.T) {
	p := mustCompile(t, func(s *v1alpha1.CleanupPolicySpec) {
		s.ClusterSelector = "cluster.status.conditions.all(c, c.status == 'True')"
	})
	c := cluster("a", nil)
	conds := make([]any, 10_000)
	for i := range conds {
		conds[i] = map[string]any{"type": fmt.Sprint("T", i), "status": "True"}
	}
	c["status"] = map[string]any{"conditions": conds}
	a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), c)
	if !p.ClusterSelector.Untracked() {
		t.Fatal("the selector is tracked")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.ClusterSelector.EvalUntrackedWithin(ctx, a); !errors.Is(err, interpreter.InterruptError{}) && !cel.Transient(err) {
		t.Fatalf("got %v, want the evaluation interrupted", err)
	}
	if ok, err := p.ClusterSelector.Bool(a); err != nil || !ok {
		t.Fatalf("got %v, %v; want true without a deadline reached", ok, err)
	}
}
