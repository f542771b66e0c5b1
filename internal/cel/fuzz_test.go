package cel_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/common/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/fuzzrand"
)

// FuzzCompile compiles random CleanupPolicies, typed by the real OCM and
// policy CRDs, and evaluates what compiles on random objects. The bytes
// drive the choices (see fuzzrand.New): which fields are set, and expressions
// built from the variables of each field, nested and combined, up to and
// past the length limit. e1, e2 and e3 are used whole as expressions, as
// string literals, as label keys and values, and spliced into expressions.
//
// Properties, for every input:
//   - Compile never panics; it returns a policy or errors, never both, and
//     every error names a field under spec;
//   - an accepted policy has one program per expression, and the estimated
//     cost of each is within MaxEstimatedCost;
//   - evaluating an accepted expression on a random object of its kind
//     returns, within the per-call cost limit when it succeeds; a failure
//     is an EvalError. (The actual cost is not held to the estimate: on
//     dynamic variables, such as manifest, cel-go's estimate can be a step
//     or two below the actual cost. The per-call limit is what bounds it.)
//   - where an expression has an untracked program, the tracked program
//     fails as it does or returns the same value, at a cost within the
//     estimate the untracked evaluation is charged;
//   - renaming the reserved word namespace keeps an expression's length, so
//     error positions stay true, and restores to the text as written.
func FuzzCompile(f *testing.F) {
	// The cases worth keeping (every field accepted, a comprehension in a
	// comprehension, refused for cost, join over a computed list, refused
	// everywhere, nested past the parser's depth) are in testdata/fuzz.
	for _, e := range []string{"", "cluster.metadata.labels[?'env'].orValue('') == 'prod'", "namespace", "'"} {
		f.Add([]byte{}, e, e, e)
	}
	env := typedEnv(f)
	f.Fuzz(func(t *testing.T, data []byte, e1, e2, e3 string) {
		for _, s := range []string{e1, e2, e3} {
			checkRename(t, s)
		}
		g := &exprGen{r: fuzzrand.New(data), extra: []string{e1, e2, e3}}
		p := g.policy()
		compiled, errs := cel.Compile(env, p)
		if len(errs) > 0 {
			if compiled != nil {
				t.Fatalf("a policy and errors: %v", errs.ToAggregate())
			}
			for _, e := range errs {
				if e.Field != "spec" && !strings.HasPrefix(e.Field, "spec.") {
					t.Fatalf("error names no field of the spec: %v", e)
				}
			}
			return
		}
		if compiled == nil {
			t.Fatal("neither a policy nor errors")
		}
		checkCompiled(t, g, compiled)
	})
}

func checkRename(t *testing.T, s string) {
	renamed := cel.RenameNamespace(s)
	if len(renamed) != len(s) {
		t.Fatalf("renaming %q changed its length: %q", s, renamed)
	}
	if !strings.Contains(s, "ns_object") && cel.RestoreNamespace(renamed) != s {
		t.Fatalf("%q renamed to %q restores to %q", s, renamed, cel.RestoreNamespace(renamed))
	}
}

// scoped is one compiled expression, the scope it was compiled in and how
// to bind its variables.
type scoped struct {
	expr  *cel.Expression
	src   string // the expression as written
	scope cel.Scope
	bind  func(a *cel.Activation) *cel.Activation
}

func checkCompiled(t *testing.T, g *exprGen, p *cel.Policy) {
	s := p.Spec
	same := func(name string, got, want int) {
		if got != want {
			t.Fatalf("%s: %d programs for %d expressions", name, got, want)
		}
	}
	same("variables", len(p.Variables), len(s.Variables))
	same("removeStrategy.rules", len(p.StrategyRules), len(s.RemoveStrategy.Rules))
	same("monitoredResources", len(p.MonitoredWhen), len(s.MonitoredResources))
	same("deletionStages", len(p.StageWhen), len(s.DeletionStages))
	same("orphaning", len(p.Orphaning), len(s.Orphaning))
	if (p.ClusterSelector == nil) != (s.ClusterSelector == "") || (p.KeepNamespace == nil) != (s.KeepNamespace == "") ||
		(p.DeletionProtection == nil) != (s.DeletionProtection == "") {
		t.Fatal("an expression without a program, or a program without an expression")
	}

	object := func(a *cel.Activation) *cel.Activation { return a.With(cel.VarObject, g.object()) }
	var all []scoped
	add := func(e *cel.Expression, src string, scope cel.Scope, bind func(a *cel.Activation) *cel.Activation) {
		if e != nil {
			all = append(all, scoped{e, src, scope, bind})
		}
	}
	add(p.ClusterSelector, s.ClusterSelector, cel.ScopeSelector, nil)
	for i, e := range p.Variables {
		add(e, s.Variables[i].Expression, cel.ScopeVariable, nil)
	}
	for i, e := range p.StrategyRules {
		add(e, s.RemoveStrategy.Rules[i].When, cel.ScopeStrategy, nil)
	}
	for i, e := range p.MonitoredWhen {
		add(e, s.MonitoredResources[i].When, cel.ScopeObject, object)
	}
	for i, e := range p.StageWhen {
		add(e, s.DeletionStages[i].When, cel.ScopeObject, object)
	}
	add(p.KeepNamespace, s.KeepNamespace, cel.ScopeNamespace, func(a *cel.Activation) *cel.Activation { return a.With(cel.VarNamespace, g.namespace()) })
	add(p.DeletionProtection, s.DeletionProtection, cel.ScopeStrategy, nil)
	for i, e := range p.Orphaning {
		add(e, s.Orphaning[i].When, cel.ScopeManifest, func(a *cel.Activation) *cel.Activation {
			return a.With(cel.VarWork, g.work()).With(cel.VarManifest, g.manifest())
		})
	}
	for i, e := range p.PruneRules {
		add(e, s.Prune.Rules[i].When, cel.ScopePrune, func(a *cel.Activation) *cel.Activation { return a.With(cel.VarPolicy, g.configurationPolicy()) })
	}

	for _, x := range all {
		est, err := cel.EstimatedCost(p, x.scope, x.src)
		if err != nil {
			t.Fatalf("%s: accepted, yet it does not check again: %v", x.expr.Path, err)
		}
		if est.Max > cel.MaxEstimatedCost {
			t.Fatalf("%s: accepted with an estimated cost of %d, over %d", x.expr.Path, est.Max, uint64(cel.MaxEstimatedCost))
		}
		var cluster map[string]any
		if x.scope != cel.ScopePrune || g.r.IntN(4) != 0 {
			cluster = g.cluster()
		}
		a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), cluster)
		if x.bind != nil {
			a = x.bind(a)
		}
		cost, err := evalReturns(t, x, a)
		sameAsLibrary(t, x, a, err)
		sameTracked(t, x, a)
		if err != nil {
			var evalErr *cel.EvalError
			if !errors.As(err, &evalErr) {
				t.Fatalf("%s: the failure is not an EvalError: %v", x.expr.Path, err)
			}
			continue
		}
		if cost > cel.PerCallCostLimit {
			t.Fatalf("%s: cost %d, over the per-call limit %d", x.expr.Path, cost, cel.PerCallCostLimit)
		}
	}
}

// sameAsLibrary evaluates x again on the objects as the API server
// library's adapter alone binds them, and fails the test unless both fail
// or both succeed with the same truth value. (A map's keys come in no fixed
// order, so the cost of a comprehension that stops early, the order of a
// list built from a map and which of two errors is reported may differ
// from one evaluation to the next; TestFastAdapterMatchesLibrary compares
// those where they are fixed.)
func sameAsLibrary(t *testing.T, x scoped, a *cel.Activation, err error) {
	t.Helper()
	if cel.Transient(err) {
		return // interrupted for time: another run may not be
	}
	val, _, _ := x.expr.EvalCost(a)
	libVal, _, libErr := x.expr.EvalCost(a.LibraryAdapted(cel.NewBudget(cel.ReconcileCostBudget)))
	if cel.Transient(libErr) {
		return
	}
	if (err == nil) != (libErr == nil) {
		t.Fatalf("%s: %v here, %v through the library's adapter:\n%s", x.expr.Path, err, libErr, x.src)
	}
	if b, ok := val.(types.Bool); ok && err == nil && libVal != b {
		t.Fatalf("%s: %v here, %v through the library's adapter:\n%s", x.expr.Path, val, libVal, x.src)
	}
}

// sameTracked evaluates x with its untracked program and with its tracked
// one and fails the test unless both fail or return the same value, and
// the tracked cost is within the estimate the untracked one is charged.
func sameTracked(t *testing.T, x scoped, a *cel.Activation) {
	t.Helper()
	if !x.expr.Untracked() {
		return
	}
	val, charge, err := x.expr.EvalUntracked(a)
	tval, cost, terr := x.expr.EvalTracked(a)
	switch {
	case cel.Transient(err) || cel.Transient(terr):
	case (err == nil) != (terr == nil):
		t.Fatalf("%s: untracked %v, %v; tracked %v, %v\n%s", x.expr.Path, val, err, tval, terr, x.src)
	case err == nil && !sameType(val, tval):
		t.Fatalf("%s: untracked %v, tracked %v\n%s", x.expr.Path, val, tval, x.src)
	case cost > charge:
		t.Fatalf("%s: tracked cost %d, over the estimate %d\n%s", x.expr.Path, cost, charge, x.src)
	}
}

// hangAfter is far beyond the per-call timeout: an evaluation still running
// then does not stop by itself.
const hangAfter = 60 * cel.PerCallTimeout

// evalReturns evaluates e and fails the test if it does not return.
func evalReturns(t *testing.T, x scoped, a *cel.Activation) (uint64, error) {
	type result struct {
		cost uint64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		_, cost, err := x.expr.EvalCost(a)
		done <- result{cost, err}
	}()
	select {
	case r := <-done:
		return r.cost, r.err
	case <-time.After(hangAfter):
		t.Fatalf("%s: the evaluation did not return:\n%s", x.expr.Path, x.src)
		return 0, nil
	}
}

// exprGen builds policies, expressions and objects from the choices.
type exprGen struct {
	r     *rand.Rand
	extra []string
	vars  []string // variables declared so far
	// valid policies only mean to compile: the fuzzer's strings are only
	// values in them, enums are valid, names unique, expressions bounded.
	valid bool
}

func (g *exprGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

// fuzzed is one of the fuzzer's strings.
func (g *exprGen) fuzzed() string { return g.extra[g.r.IntN(len(g.extra))] }

// literal quotes s as a CEL string literal.
func literal(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, c := range []byte(s) {
		switch {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func (g *exprGen) str() string {
	if g.r.IntN(5) == 0 {
		return literal(g.fuzzed())
	}
	return literal(g.pick("", "prod", "sandbox", "true", "env", "a,b", "ManagedClusterConditionAvailable", "ü", strings.Repeat("x", 100)))
}

// rootsOf are the variables of each scope, with the roots of their fields.
var rootsOf = map[cel.Scope][]string{
	cel.ScopeSelector:  {"cluster"},
	cel.ScopeVariable:  {"cluster"},
	cel.ScopeStrategy:  {"cluster"},
	cel.ScopeObject:    {"object", "cluster"},
	cel.ScopeNamespace: {"namespace", "cluster"},
	cel.ScopeManifest:  {"manifest", "work", "cluster"},
	cel.ScopePrune:     {"policy", "cluster"},
}

// Typed paths of each variable: strings, lists and maps.
var (
	stringPaths = map[string][]string{
		"cluster":   {"metadata.name", "metadata.uid", "spec.managedClusterClientConfigs[0].url", "status.version.kubernetes"},
		"object":    {"metadata.name", "metadata.namespace", "kind"},
		"namespace": {"metadata.name", "status.phase"},
		"manifest":  {"kind", "apiVersion", "metadata.name"},
		"work":      {"metadata.name", "metadata.namespace"},
		"policy":    {"spec.remediationAction", "metadata.name", "spec.pruneObjectBehavior"},
	}
	listPaths = map[string][]string{
		"cluster":   {"status.clusterClaims", "status.conditions", "spec.taints", "metadata.finalizers", "spec.managedClusterClientConfigs"},
		"object":    {"metadata.finalizers", "metadata.ownerReferences"},
		"namespace": {"metadata.finalizers", "spec.finalizers"},
		"manifest":  {"spec.containers", "metadata.finalizers"},
		"work":      {"spec.workload.manifests", "status.conditions"},
		"policy":    {"spec.object__dash__templates", "status.compliancyDetails"},
	}
	mapPaths = map[string][]string{
		"cluster":   {"metadata.labels", "metadata.annotations", "status.capacity"},
		"object":    {"metadata.labels", "metadata.annotations"},
		"namespace": {"metadata.labels"},
		"manifest":  {"metadata.labels", "data"},
		"work":      {"metadata.labels"},
		"policy":    {"metadata.labels"},
	}
)

func (g *exprGen) root(scope cel.Scope) string { return g.pick(rootsOf[scope]...) }

func (g *exprGen) strExpr(scope cel.Scope, depth int) string {
	root := g.root(scope)
	switch g.r.IntN(9) {
	case 0:
		return g.str()
	case 1:
		return fmt.Sprintf("%s.%s[?%s].orValue(%s)", root, g.pick(mapPaths[root]...), g.str(), g.str())
	case 2:
		return fmt.Sprintf("%s.%s[%s]", root, g.pick(mapPaths[root]...), g.str())
	case 3:
		if depth > 0 {
			return fmt.Sprintf("%s + %s", g.strExpr(scope, depth-1), g.strExpr(scope, depth-1))
		}
	case 4:
		if depth > 0 {
			return fmt.Sprintf("(%s).lowerAscii()", g.strExpr(scope, depth-1))
		}
	case 5:
		if depth > 0 {
			return fmt.Sprintf("%s.split(%s).join(%s)", g.strExpr(scope, depth-1), g.str(), g.str())
		}
	case 6:
		if len(g.vars) > 0 && scope != cel.ScopeSelector {
			return fmt.Sprintf("string(variables.%s)", g.pick(g.vars...))
		}
	}
	return root + "." + g.pick(stringPaths[root]...)
}

func (g *exprGen) listExpr(scope cel.Scope, depth int) string {
	root := g.root(scope)
	switch g.r.IntN(6) {
	case 0:
		return "[1, 2, 3]"
	case 1:
		return fmt.Sprintf("%s.split(%s)", g.strExpr(scope, depth), g.str())
	case 2:
		return root + "." + g.pick(mapPaths[root]...)
	case 3:
		if depth > 0 {
			return fmt.Sprintf("%s.filter(x, %s)", g.listExpr(scope, depth-1), g.boolExpr(scope, depth-1))
		}
	}
	return root + "." + g.pick(listPaths[root]...)
}

func (g *exprGen) boolExpr(scope cel.Scope, depth int) string {
	if depth <= 0 {
		switch g.r.IntN(6) {
		case 0:
			return g.pick("true", "false")
		case 1:
			return fmt.Sprintf("has(%s.%s)", g.root(scope), g.pick("metadata.labels", "spec", "status", "metadata.deletionTimestamp"))
		case 2:
			return fmt.Sprintf("size(%s) > %d", g.listExpr(scope, 0), g.r.IntN(5))
		}
		return fmt.Sprintf("%s == %s", g.strExpr(scope, 0), g.str())
	}
	d := depth - 1
	switch g.r.IntN(14) {
	case 0:
		return fmt.Sprintf("%s && %s", g.boolExpr(scope, d), g.boolExpr(scope, d))
	case 1:
		return fmt.Sprintf("(%s || %s)", g.boolExpr(scope, d), g.boolExpr(scope, d))
	case 2:
		return "!(" + g.boolExpr(scope, d) + ")"
	case 3:
		return fmt.Sprintf("%s.exists(x, %s)", g.listExpr(scope, d), g.boolExpr(scope, d))
	case 4:
		return fmt.Sprintf("%s.all(x, %s)", g.listExpr(scope, d), g.boolExpr(scope, d))
	case 5:
		// A comprehension in a comprehension over lists whose size the
		// schema does not bound: the cost bound must hold.
		return fmt.Sprintf("%s.all(a, %s.exists(b, %s))", g.listExpr(scope, d), g.listExpr(scope, d), g.boolExpr(scope, d))
	case 6:
		return fmt.Sprintf("%s.startsWith(%s)", g.strExpr(scope, d), g.strExpr(scope, d))
	case 7:
		return fmt.Sprintf("%s.matches(%s)", g.strExpr(scope, d), literal(g.pick("^c[0-9]+$", "(a+)+$", ".*", "[", g.fuzzed())))
	case 8:
		return fmt.Sprintf("%s in %s", g.str(), g.listExpr(scope, d))
	case 9:
		return fmt.Sprintf("%s.map(x, %s).size() >= %d", g.listExpr(scope, d), g.pick("x", "1", "[x, x]"), g.r.IntN(3))
	case 10:
		return fmt.Sprintf("%s ? %s : %s", g.boolExpr(scope, d), g.boolExpr(scope, d), g.boolExpr(scope, d))
	case 11:
		return fmt.Sprintf("size(%s.metadata.?labels.orValue({})) >= %d", g.root(scope), g.r.IntN(2))
	case 12:
		if g.valid {
			return fmt.Sprintf("%s == %s", g.strExpr(scope, d), g.str())
		}
		if g.r.IntN(2) == 0 {
			return g.fuzzed()
		}
		return "(" + g.fuzzed() + ")"
	}
	return g.boolExpr(scope, 0)
}

// expr is the expression of one field: mostly built, sometimes one of the
// fuzzer's strings whole, sometimes huge.
func (g *exprGen) expr(scope cel.Scope) string {
	if g.valid {
		return g.boolExpr(scope, 1+g.r.IntN(3))
	}
	switch g.r.IntN(12) {
	case 0:
		return g.fuzzed()
	case 1:
		// Deeply nested, or long enough to reach the length limit.
		n := g.r.IntN(400)
		return strings.Repeat("(", n) + g.boolExpr(scope, 1) + strings.Repeat(")", n)
	case 2:
		parts := make([]string, 1+g.r.IntN(300))
		for i := range parts {
			parts[i] = g.boolExpr(scope, 0)
		}
		return strings.Join(parts, g.pick(" && ", " || "))
	case 3:
		return strings.Repeat("!", g.r.IntN(300)) + g.boolExpr(scope, 1)
	}
	return g.boolExpr(scope, 1+g.r.IntN(4))
}

func (g *exprGen) gvr() v1alpha1.GroupVersionResource {
	switch g.r.IntN(5) {
	case 0:
		return v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	case 1:
		return v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	case 2:
		if !g.valid {
			return v1alpha1.GroupVersionResource{Group: g.fuzzed(), Version: g.fuzzed(), Resource: g.fuzzed()}
		}
	}
	return v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
}

func (g *exprGen) name(prefix string, i int) string {
	if g.valid {
		return fmt.Sprintf("%s%d", prefix, i)
	}
	switch g.r.IntN(8) {
	case 0:
		return g.fuzzed()
	case 1:
		return prefix + "0" // a duplicate, from the second on
	}
	return fmt.Sprintf("%s%d", prefix, i)
}

func (g *exprGen) policy() *v1alpha1.CleanupPolicy {
	p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fuzz", UID: "fuzz", Generation: 1}}
	s := &p.Spec
	g.valid = g.r.IntN(3) != 2
	if g.r.IntN(2) == 0 {
		s.ClusterSelector = g.expr(cel.ScopeSelector)
	}
	for i := range g.r.IntN(4) {
		name := g.name("v", i)
		var e string
		switch g.r.IntN(4) {
		case 0:
			e = g.strExpr(cel.ScopeVariable, 2)
		case 1:
			e = g.listExpr(cel.ScopeVariable, 2)
		case 2:
			e = fmt.Sprintf("size(%s)", g.listExpr(cel.ScopeVariable, 1))
		default:
			e = g.expr(cel.ScopeVariable)
		}
		s.Variables = append(s.Variables, v1alpha1.Variable{Name: name, Expression: e})
		g.vars = append(g.vars, name)
	}
	strategies := v1alpha1.RemoveStrategyTypes
	if !g.valid {
		strategies = append([]v1alpha1.RemoveStrategyType{"", "needless"}, strategies...)
	}
	s.RemoveStrategy.Default = strategies[g.r.IntN(len(strategies))]
	for range g.r.IntN(3) {
		s.RemoveStrategy.Rules = append(s.RemoveStrategy.Rules, v1alpha1.StrategyRule{
			When: g.expr(cel.ScopeStrategy), Strategy: strategies[g.r.IntN(len(strategies))]})
	}
	if g.r.IntN(3) == 0 {
		s.RemoveStrategy.Timeout = &metav1.Duration{Duration: time.Duration(1 + g.r.Int64N(int64(2*time.Hour)))}
		if !g.valid {
			s.RemoveStrategy.Timeout.Duration -= time.Minute
		}
	}
	for range g.r.IntN(3) {
		m := v1alpha1.MonitoredResource{GroupVersionResource: g.gvr()}
		if g.r.IntN(2) == 0 {
			m.When = g.expr(cel.ScopeObject)
		}
		s.MonitoredResources = append(s.MonitoredResources, m)
	}
	for i := range g.r.IntN(3) {
		st := v1alpha1.DeletionStage{Name: g.name("s", i), GroupVersionResource: g.gvr()}
		if g.r.IntN(2) == 0 {
			st.When = g.expr(cel.ScopeObject)
		}
		s.DeletionStages = append(s.DeletionStages, st)
	}
	if g.r.IntN(2) == 0 {
		s.KeepNamespace = g.expr(cel.ScopeNamespace)
	}
	if g.r.IntN(3) == 0 {
		s.DeletionSignal = &v1alpha1.DeletionSignal{WorkName: g.pick("", "cleanup-signal", g.value())}
		for range g.r.IntN(3) {
			raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"alive","namespace":"kube-system"}}`
			if !g.valid {
				raw = g.pick(raw, `{"kind":"ConfigMap"}`, `[]`, `null`, `{"apiVersion":1}`, g.fuzzed())
			}
			s.DeletionSignal.Manifests = append(s.DeletionSignal.Manifests, v1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(raw)}})
		}
	}
	for i := range g.r.IntN(3) {
		s.Orphaning = append(s.Orphaning, v1alpha1.OrphaningRule{Name: g.name("r", i), When: g.expr(cel.ScopeManifest)})
	}
	if g.r.IntN(3) == 0 {
		behaviors := v1alpha1.PruneBehaviors
		if !g.valid {
			behaviors = append([]v1alpha1.PruneBehavior{"", "deleteAll"}, behaviors...)
		}
		s.Prune = &v1alpha1.Prune{Default: behaviors[g.r.IntN(len(behaviors))]}
		if g.valid && g.r.IntN(2) == 0 {
			s.Prune.Default = ""
		}
		for range g.r.IntN(3) {
			s.Prune.Rules = append(s.Prune.Rules, v1alpha1.PruneRule{When: g.expr(cel.ScopePrune), Behavior: behaviors[g.r.IntN(len(behaviors))]})
		}
	}
	if g.r.IntN(2) == 0 {
		s.DeletionProtection = g.expr(cel.ScopeStrategy)
	}
	return p
}

// Random objects, within their schemas: what the API server stores.

func (g *exprGen) value() string {
	if g.r.IntN(4) == 0 {
		return g.fuzzed()
	}
	return g.pick("", "prod", "sandbox", "true", "a,b,c", "ü", strings.Repeat("x", g.r.IntN(2000)))
}

func (g *exprGen) stringMap() map[string]any {
	m := map[string]any{}
	for range g.r.IntN(8) {
		m[g.pick("env", "tier", "app", "keep", "cleanup", "legacy", g.fuzzed())] = g.value()
	}
	return m
}

func (g *exprGen) list(n int, item func() any) []any {
	out := make([]any, g.r.IntN(n))
	for i := range out {
		out[i] = item()
	}
	return out
}

// conditions are up to n conditions of distinct types, as the API server
// keeps a list of conditions keyed by type (two of one type it refuses,
// and CEL's equality of such a list is not defined).
func (g *exprGen) conditions(n int) []any {
	out := []any{}
	seen := map[any]bool{}
	for _, c := range g.list(n, g.condition) {
		if t := c.(map[string]any)["type"]; !seen[t] {
			seen[t] = true
			out = append(out, c)
		}
	}
	return out
}

func (g *exprGen) metadata(name string) map[string]any {
	md := map[string]any{"name": name, "uid": "u-" + name, "generation": int64(g.r.IntN(5))}
	if g.r.IntN(4) != 0 {
		md["labels"] = g.stringMap()
	}
	if g.r.IntN(2) == 0 {
		md["annotations"] = g.stringMap()
	}
	if g.r.IntN(3) == 0 {
		md["finalizers"] = g.list(4, func() any { return g.value() })
	}
	if g.r.IntN(4) == 0 {
		md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	}
	return md
}

func (g *exprGen) condition() any {
	return map[string]any{"type": g.pick("ManagedClusterConditionAvailable", "Applied", g.value()), "status": g.pick("True", "False", "Unknown"),
		"reason": "r", "message": g.value(), "lastTransitionTime": "2026-01-01T00:00:00Z"}
}

func (g *exprGen) cluster() map[string]any {
	c := map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": g.metadata(g.pick("c1", "cluster-a", g.value()))}
	if g.r.IntN(5) != 0 {
		c["spec"] = map[string]any{
			"hubAcceptsClient": g.r.IntN(2) == 0,
			"managedClusterClientConfigs": g.list(3, func() any {
				return map[string]any{"url": "https://" + g.value(), "caBundle": "Y2E="}
			}),
			"taints": g.list(4, func() any {
				return map[string]any{"key": g.pick("k", g.fuzzed()), "value": g.value(), "effect": "NoSelect", "timeAdded": "2026-01-01T00:00:00Z"}
			}),
		}
	}
	if g.r.IntN(5) != 0 {
		c["status"] = map[string]any{
			"conditions": g.conditions(5),
			"clusterClaims": g.list(60, func() any {
				return map[string]any{"name": g.pick("id.k8s.io", "platform.open-cluster-management.io", g.value()), "value": g.value()}
			}),
			"capacity": map[string]any{"cpu": int64(g.r.IntN(64)), "memory": g.pick("16Gi", "1000")},
			"version":  map[string]any{"kubernetes": g.pick("v1.37.0", g.value())},
		}
	}
	return c
}

func (g *exprGen) object() map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": g.pick("ConfigMap", "ManifestWork"), "metadata": g.metadata(g.value())}
}

func (g *exprGen) namespace() map[string]any {
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": g.metadata(g.pick("c1", g.value()))}
	if g.r.IntN(3) != 0 {
		ns["status"] = map[string]any{"phase": g.pick("Active", "Terminating")}
	}
	return ns
}

func (g *exprGen) manifest() map[string]any {
	m := map[string]any{"apiVersion": g.pick("v1", "apps/v1", g.value()), "kind": g.pick("ConfigMap", "CustomResourceDefinition", g.value()),
		"metadata": g.metadata(g.value())}
	if g.r.IntN(2) == 0 {
		m["data"] = g.stringMap()
	}
	if g.r.IntN(2) == 0 {
		m["spec"] = map[string]any{"replicas": int64(g.r.IntN(3)), "containers": g.list(3, func() any { return map[string]any{"name": g.value()} })}
	}
	return m
}

func (g *exprGen) work() map[string]any {
	return map[string]any{"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork", "metadata": g.metadata(g.value()),
		"spec":   map[string]any{"workload": map[string]any{"manifests": g.list(4, func() any { return g.manifest() })}},
		"status": map[string]any{"conditions": g.conditions(3)}}
}

func (g *exprGen) configurationPolicy() map[string]any {
	return map[string]any{"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy", "metadata": g.metadata(g.value()),
		"spec": map[string]any{"remediationAction": g.pick("enforce", "inform", "Enforce"), "pruneObjectBehavior": g.pick("None", "DeleteAll"),
			"object-templates": g.list(3, func() any {
				return map[string]any{"complianceType": g.pick("musthave", "mustnothave"), "objectDefinition": map[string]any{"kind": g.value()}}
			})}}
}
