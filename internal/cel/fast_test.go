package cel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// oddClusters are ManagedClusters with the values a fast path may get
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

// fastExprs are selectors and rules, in and out of the fast path's subset.
var fastExprs = map[cel.Scope][]string{
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

// TestFastPathMatchesProgram evaluates selectors and rules on odd objects
// on the fast path and with the tracked program: where the fast path
// answers, the program succeeds with the same value at the same cost; where
// it gives up, the evaluation is the program's, error and cost included.
func TestFastPathMatchesProgram(t *testing.T) {
	ctx := context.Background()
	answered, total := 0, 0
	for scope, exprs := range fastExprs {
		for _, src := range exprs {
			e := compileIn(t, scope, src)
			p, _ := cel.Compile(typedEnv(t), policy(nil))
			for cname, c := range oddClusters() {
				for mname, m := range oddManifests() {
					if scope == cel.ScopeSelector && mname != "configmap" {
						continue
					}
					a := bindFor(scope, p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), c), m)
					total++
					if checkFastPath(t, e, src, a, cname+"/"+mname) {
						answered++
					}
				}
			}
		}
	}
	// Most of the cases are in the subset: a fast path that gave up on
	// everything would pass the comparisons.
	if answered*2 < total {
		t.Fatalf("the fast path answered %d of %d evaluations", answered, total)
	}
	t.Logf("the fast path answered %d of %d evaluations", answered, total)
}

// checkFastPath compares the fast path with the program on one evaluation
// and returns whether the fast path answered.
func checkFastPath(t *testing.T, e *cel.Expression, src string, a *cel.Activation, obj string) bool {
	t.Helper()
	progVal, progCost, progErr := e.EvalProgram(a)
	val, cost, err := e.EvalCost(a)
	switch {
	case cel.Transient(err) || cel.Transient(progErr):
		// Interrupted for time on a loaded machine: another run may not be.
	case (err == nil) != (progErr == nil) || err != nil && err.Error() != progErr.Error():
		t.Fatalf("%s on %s: error %v, the program's %v", src, obj, err, progErr)
	case cost != progCost:
		t.Fatalf("%s on %s: cost %d, the program's %d", src, obj, cost, progCost)
	case err == nil && !sameFastVal(val, progVal):
		t.Fatalf("%s on %s: %v, the program's %v", src, obj, val, progVal)
	}
	fastVal, fastCost, ok := e.EvalFast(a)
	if !ok {
		return false
	}
	switch {
	case cel.Transient(progErr):
	case progErr != nil:
		t.Fatalf("%s on %s: the fast path answered %v where the program failed: %v", src, obj, fastVal, progErr)
	case fastCost != progCost:
		t.Fatalf("%s on %s: the fast path's cost %d, the program's %d", src, obj, fastCost, progCost)
	case !sameFastVal(fastVal, progVal):
		t.Fatalf("%s on %s: the fast path's %v, the program's %v", src, obj, fastVal, progVal)
	}
	return true
}

func sameFastVal(a, b ref.Val) bool {
	if a.Type() != b.Type() {
		return false
	}
	return a.Equal(b) == types.True
}

// TestFastPathCovers holds the expressions of the benchmarks, and the
// shapes most policies use, to the fast path: a change that takes them off
// it fails here, not only in a benchmark.
func TestFastPathCovers(t *testing.T) {
	in := map[cel.Scope][]string{
		cel.ScopeSelector: {fastExprs[cel.ScopeSelector][0], "has(cluster.metadata.labels.env)", "!cluster.metadata.name.endsWith('-x')",
			"cluster.status.conditions.all(c, c.status == 'True')", "cluster.metadata.labels['env'] != 'x'",
			"cluster.metadata.labels[?'env'].orValue('') == 'prod' && cluster.?spec.?hubAcceptsClient.orValue(false)",
			"cluster != null && cluster.metadata.labels[?'env'].orValue('') == 'dev'"},
		cel.ScopeManifest: {fastExprs[cel.ScopeManifest][0]},
		cel.ScopeObject:   {fastExprs[cel.ScopeObject][0]},
	}
	for scope, exprs := range in {
		for _, src := range exprs {
			if !compileIn(t, scope, src).HasFastPath() {
				t.Errorf("%s: no fast path", src)
			}
		}
	}
	out := []string{"cluster.metadata.name == 'a' || true", "size(cluster.metadata.labels) > 0", "cluster.metadata.labels.exists(k, k == 'env')",
		"cluster.status.conditions.exists_one(c, c.type == 'x')", "'a' == 'a' && cluster.spec.hubAcceptsClient", "cluster.status.conditions[0].type == 'x'"}
	for _, src := range out {
		if compileIn(t, cel.ScopeSelector, src).HasFastPath() {
			t.Errorf("%s: a fast path for an expression outside the subset", src)
		}
	}
}

// TestFastPathRandom builds random expressions of the fast path's subset,
// and a few outside it, and compares both paths on the odd objects.
func TestFastPathRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 4))
	g := &fastGen{r: r}
	clusters := oddClusters()
	names := make([]string, 0, len(clusters))
	for n := range clusters {
		names = append(names, n)
	}
	ctx := context.Background()
	p, _ := cel.Compile(typedEnv(t), policy(nil))
	n := 300
	if testing.Short() {
		n = 50
	}
	answered, total, compiled := 0, 0, 0
	for range n {
		src := g.boolean(3)
		e, err := tryCompileIn(t, cel.ScopeSelector, src)
		if err != nil {
			continue // operands of different types
		}
		compiled++
		for range 8 {
			name := names[r.IntN(len(names))]
			a := p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), clusters[name])
			total++
			if checkFastPath(t, e, src, a, name) {
				answered++
			}
		}
	}
	t.Logf("%d of %d expressions compiled; the fast path answered %d of %d evaluations", compiled, n, answered, total)
	if compiled*2 < n || answered*4 < total {
		t.Fatalf("the fast path answered %d of %d evaluations", answered, total)
	}
}

type fastGen struct {
	r *rand.Rand
	// in says the expression is inside a comprehension over conditions.
	in bool
}

func (g *fastGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *fastGen) str(root string) string {
	switch g.r.IntN(6) {
	case 0:
		return g.pick(root+".metadata.name", root+".metadata.labels.env", root+".metadata.labels['tier']")
	case 1:
		return root + ".metadata.labels[?" + g.pick("'env'", "'tier'", "'flag'", "'nested'", "'a.b/c'") + "].orValue(" + g.pick("''", "'prod'", "1", "true") + ")"
	case 2:
		return root + g.pick(".metadata.?annotations.?note.orValue('')", ".?metadata.?labels[?'env'].orValue('')", ".?status.?version.?kubernetes.orValue('')")
	case 3:
		if g.in {
			return g.pick("c.type", "c.status")
		}
		return root + ".metadata.name"
	default:
		return g.pick("'prod'", "''", "'gold'", "'ManagedClusterConditionAvailable'", "'ü'", "'a'", "1", "true")
	}
}

func (g *fastGen) boolean(depth int) string {
	root := "cluster"
	if depth <= 0 {
		switch g.r.IntN(5) {
		case 0:
			return "has(" + g.pick("cluster.metadata.labels", "cluster.metadata.labels.env", "cluster.spec.hubAcceptsClient", "cluster.metadata.annotations.note") + ")"
		case 1:
			return "cluster.spec.hubAcceptsClient"
		case 2:
			return g.str(root) + g.pick(".startsWith(", ".endsWith(", ".contains(") + g.str(root) + ")"
		default:
			return g.str(root) + g.pick(" == ", " != ") + g.str(root)
		}
	}
	switch g.r.IntN(6) {
	case 0:
		return "(" + g.boolean(depth-1) + " && " + g.boolean(depth-1) + ")"
	case 1:
		return "(" + g.boolean(depth-1) + " || " + g.boolean(depth-1) + ")"
	case 2:
		return "!(" + g.boolean(depth-1) + ")"
	case 3:
		if g.in {
			return g.boolean(depth - 1)
		}
		g.in = true
		defer func() { g.in = false }()
		return "cluster.status.conditions." + g.pick("exists", "all") + "(c, " + g.boolean(depth-1) + ")"
	default:
		return g.boolean(depth - 1)
	}
}
