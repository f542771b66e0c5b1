package cel

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/lazy"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Expression is one compiled expression of a policy.
type Expression struct {
	// Path is the field the expression came from, such as spec.orphaning[1].when.
	Path    *field.Path
	program cel.Program
	output  *cel.Type
	// iterates says the expression holds a comprehension (all, exists,
	// map, filter, ...): only such an evaluation can run long on little
	// cost, and only it is bounded in time (see evalCost).
	iterates bool
	// untracked is the program without cost tracking, where the cost
	// estimate bounds every evaluation (see untracked.go); else nil.
	untracked cel.Program
	// charge is the estimate an untracked evaluation is charged.
	charge uint64
	// ast is the checked expression.
	ast *celast.AST
	// readsManifests says an orphaning rule reads more of a work's
	// manifests than the cache keeps (see readsManifests).
	readsManifests bool
}

// ReadsOnly reports whether every use of variable in the expression
// selects one of fields from it: only those fields of the bound object can
// change the result, so a caller may bind an object that has only them.
func (e *Expression) ReadsOnly(variable string, fields ...string) bool {
	name := celName(variable)
	uses := celast.MatchDescendants(celast.NavigateAST(e.ast), func(n celast.NavigableExpr) bool {
		return n.Kind() == celast.IdentKind && n.AsIdent() == name
	})
	for _, use := range uses {
		parent, ok := use.Parent()
		if !ok || parent.Kind() != celast.SelectKind || !slices.Contains(fields, parent.AsSelect().FieldName()) {
			return false
		}
	}
	return true
}

// ReadsOnlyPaths reports whether every use of variable in the expression
// is a chain of constant field selections that reaches one of paths, or a
// field within one: only those fields of the bound object can change the
// result. Any other use (the object, or a field above the paths, passed to
// a function, compared, iterated or indexed by a computed key) reads more.
func (e *Expression) ReadsOnlyPaths(variable string, paths ...[]string) bool {
	name := celName(variable)
	uses := celast.MatchDescendants(celast.NavigateAST(e.ast), func(n celast.NavigableExpr) bool {
		return n.Kind() == celast.IdentKind && n.AsIdent() == name
	})
	for _, use := range uses {
		path := accessPath(use)
		if !slices.ContainsFunc(paths, func(p []string) bool { return len(path) >= len(p) && slices.Equal(path[:len(p)], p) }) {
			return false
		}
	}
	return true
}

// Policy is a compiled CleanupPolicy: the spec it was compiled from and one
// program per expression. A nil expression is a field left empty.
type Policy struct {
	UID        types.UID
	Name       string
	Generation int64
	Spec       *v1alpha1.CleanupPolicySpec

	ClusterSelector *Expression
	Variables       []*Expression // parallel to Spec.Variables
	StrategyRules   []*Expression // parallel to Spec.RemoveStrategy.Rules
	MonitoredWhen   []*Expression // parallel to Spec.MonitoredResources; nil entries match every object
	StageWhen       []*Expression // parallel to Spec.DeletionStages; nil entries match every object
	KeepNamespace   *Expression
	// DeletionProtection is spec.deletionProtection; nil protects no cluster.
	DeletionProtection *Expression
	Orphaning          []*Expression // parallel to Spec.Orphaning
	PruneRules         []*Expression // parallel to Spec.Prune.Rules

	env  *Env
	vars *apiservercel.DeclType
	// noVars is the variables value of a policy that declares none: it
	// holds nothing to compute, so every activation shares it.
	noVars *lazy.MapValue
}

// compiler holds what one Compile call shares between fields.
type compiler struct {
	env  *Env
	vars *apiservercel.DeclType
	envs [numScopes]*cel.Env
	// untrackedEnvs plan the programs without cost tracking, one per
	// scope, built when first needed.
	untrackedEnvs [numScopes]*cel.Env
	errs          field.ErrorList
}

// Compile type-checks every expression of the policy, checks what the schema
// cannot (duplicate names, enum values when the schema was bypassed, empty
// resource names) and builds the programs. Every error names its field.
func Compile(env *Env, p *v1alpha1.CleanupPolicy) (*Policy, field.ErrorList) {
	c := &compiler{
		env:  env,
		vars: apiservercel.NewObjectType("dev.fleetops.cleanup.Variables", map[string]*apiservercel.DeclField{}),
	}
	s := p.Spec.DeepCopy()
	specPath := field.NewPath("spec")
	out := &Policy{UID: p.UID, Name: p.Name, Generation: p.Generation, Spec: s, env: env, vars: c.vars}

	// Variables first: each one is typed by its expression and visible to the
	// expressions after it.
	out.Variables = c.compileVariables(specPath.Child("variables"), s.Variables)
	out.ClusterSelector = c.compileOptional(ScopeSelector, specPath.Child("clusterSelector"), s.ClusterSelector)
	out.StrategyRules = c.compileStrategy(specPath.Child("removeStrategy"), s.RemoveStrategy)
	out.MonitoredWhen, out.StageWhen = c.compileResources(specPath, s.MonitoredResources, s.DeletionStages)
	out.KeepNamespace = c.compileOptional(ScopeNamespace, specPath.Child("keepNamespace"), s.KeepNamespace)
	out.DeletionProtection = c.compileOptional(ScopeStrategy, specPath.Child("deletionProtection"), s.DeletionProtection)
	if sig := s.DeletionSignal; sig != nil {
		c.checkManifests(specPath.Child("deletionSignal", "manifests"), sig.Manifests)
	}
	out.Orphaning = c.compileOrphaning(specPath.Child("orphaning"), s.Orphaning)
	if pr := s.Prune; pr != nil {
		out.PruneRules = c.compilePrune(specPath.Child("prune"), pr)
	}

	if len(c.errs) > 0 {
		return nil, c.errs
	}
	out.noVars = lazy.NewMapValue(c.vars.CelType())
	return out, nil
}

// compileVariables compiles the variables in order, declaring each one's
// result type for the expressions after it.
func (c *compiler) compileVariables(varsPath *field.Path, vars []v1alpha1.Variable) []*Expression {
	var out []*Expression
	seen := map[string]bool{}
	for i, v := range vars {
		path := varsPath.Index(i)
		if seen[v.Name] {
			c.errs = append(c.errs, field.Duplicate(path.Child("name"), v.Name))
			continue
		}
		seen[v.Name] = true
		expr := c.compile(ScopeVariable, path.Child("expression"), v.Expression, nil)
		out = append(out, expr)
		if expr != nil {
			c.vars.Fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(expr.output), true, nil, nil)
		}
	}
	return out
}

// compileStrategy checks the strategies and the timeout and compiles the rules.
func (c *compiler) compileStrategy(rsPath *field.Path, rs v1alpha1.RemoveStrategy) []*Expression {
	var out []*Expression
	c.checkStrategy(rsPath.Child("default"), rs.Default)
	for i, r := range rs.Rules {
		path := rsPath.Child("rules").Index(i)
		c.checkStrategy(path.Child("strategy"), r.Strategy)
		out = append(out, c.compile(ScopeStrategy, path.Child("when"), r.When, cel.BoolType))
	}
	if t := rs.Timeout; t != nil && t.Duration <= 0 {
		c.errs = append(c.errs, field.Invalid(rsPath.Child("timeout"), t.Duration.String(), "must be positive"))
	}
	return out
}

// compileResources checks the monitored resources and the deletion stages
// and compiles their when expressions.
func (c *compiler) compileResources(specPath *field.Path, monitored []v1alpha1.MonitoredResource, stages []v1alpha1.DeletionStage) (monitoredWhen, stageWhen []*Expression) {
	for i, m := range monitored {
		path := specPath.Child("monitoredResources").Index(i)
		c.checkGVR(path, m.GroupVersionResource)
		monitoredWhen = append(monitoredWhen, c.compileOptional(ScopeObject, path.Child("when"), m.When))
	}
	stageNames := map[string]bool{}
	for i, st := range stages {
		path := specPath.Child("deletionStages").Index(i)
		c.checkName(path.Child("name"), st.Name, stageNames)
		c.checkGVR(path, st.GroupVersionResource)
		c.checkOutside(path, st)
		stageWhen = append(stageWhen, c.compileOptional(ScopeObject, path.Child("when"), st.When))
	}
	return monitoredWhen, stageWhen
}

// compileOrphaning checks the rules' names and compiles their conditions.
func (c *compiler) compileOrphaning(rulesPath *field.Path, rules []v1alpha1.OrphaningRule) []*Expression {
	var out []*Expression
	ruleNames := map[string]bool{}
	for i, r := range rules {
		path := rulesPath.Index(i)
		c.checkName(path.Child("name"), r.Name, ruleNames)
		out = append(out, c.compile(ScopeManifest, path.Child("when"), r.When, cel.BoolType))
	}
	return out
}

// compilePrune checks the prune behaviours and compiles the rules.
func (c *compiler) compilePrune(prunePath *field.Path, pr *v1alpha1.Prune) []*Expression {
	var out []*Expression
	if pr.Default != "" {
		c.checkPrune(prunePath.Child("default"), pr.Default)
	}
	for i, r := range pr.Rules {
		path := prunePath.Child("rules").Index(i)
		c.checkPrune(path.Child("behavior"), r.Behavior)
		out = append(out, c.compile(ScopePrune, path.Child("when"), r.When, cel.BoolType))
	}
	return out
}

func (c *compiler) compileOptional(scope Scope, path *field.Path, src string) *Expression {
	if src == "" {
		return nil
	}
	return c.compile(scope, path, src, cel.BoolType)
}

// compile compiles one expression; want nil accepts any result type. It
// records an error and returns nil when the expression is not valid.
func (c *compiler) compile(scope Scope, path *field.Path, src string, want *cel.Type) *Expression {
	if src == "" {
		c.errs = append(c.errs, field.Required(path, "an expression is required"))
		return nil
	}
	if len(src) > v1alpha1.MaxExpressionLength {
		c.errs = append(c.errs, field.TooLong(path, "", v1alpha1.MaxExpressionLength))
		return nil
	}
	env, err := c.scopeEnv(scope)
	if err != nil {
		c.errs = append(c.errs, field.InternalError(path, err))
		return nil
	}
	ast, issues := env.Compile(renameNamespace(src))
	if issues.Err() != nil {
		c.errs = append(c.errs, field.Invalid(path, src, "compilation failed: "+restoreNamespace(issues.Err().Error())))
		return nil
	}
	// dyn is accepted where bool is wanted: values of a dynamic variable
	// (a manifest) are only known at run time, where the type is checked.
	if want != nil && !ast.OutputType().IsExactType(want) && !ast.OutputType().IsExactType(cel.DynType) {
		c.errs = append(c.errs, field.Invalid(path, src,
			restoreNamespace(fmt.Sprintf("must evaluate to %s, but evaluates to %s", want, ast.OutputType()))))
		return nil
	}
	est, err := c.estimate(scope, env, ast)
	if err != nil {
		c.errs = append(c.errs, field.InternalError(path, fmt.Errorf("estimating the cost: %w", err)))
		return nil
	}
	if est.Max > MaxEstimatedCost {
		c.errs = append(c.errs, field.Forbidden(path, fmt.Sprintf(
			"estimated cost %d exceeds the limit %d: bound the lists and strings it iterates, or iterate fewer of them",
			est.Max, uint64(MaxEstimatedCost))))
		return nil
	}
	expr, err := c.programs(scope, env, ast, est)
	if err != nil {
		c.errs = append(c.errs, field.InternalError(path, err))
		return nil
	}
	expr.Path = path
	return expr
}

// programs plans the programs of a checked expression of scope: the
// tracked one, and the untracked one where est bounds every evaluation.
func (c *compiler) programs(scope Scope, env *cel.Env, ast *cel.Ast, est checker.CostEstimate) (*Expression, error) {
	e := &Expression{output: ast.OutputType(), iterates: iterates(ast), ast: ast.NativeRep(),
		readsManifests: scope == ScopeManifest && readsManifests(ast)}
	// The base environment sets the rest on every program: the per-call
	// cost limit (PerCallCostLimit), cost tracking, and OptOptimize, which
	// also compiles a constant pattern of matches() once, with the program.
	var opts []cel.ProgramOption
	if e.iterates {
		opts = append(opts, cel.InterruptCheckFrequency(checkFrequency))
	}
	var err error
	if e.program, err = env.Program(ast, opts...); err != nil {
		return nil, err
	}
	if !boundedBy(ast, est) {
		return e, nil
	}
	plain, err := c.untrackedEnv(scope, env)
	if err != nil {
		return nil, err
	}
	// The untracked environment has no program options of its own.
	if e.untracked, err = plain.PlanProgram(ast.NativeRep(), append(opts, cel.EvalOptions(cel.OptOptimize))...); err != nil {
		return nil, err
	}
	e.charge = est.Max
	return e, nil
}

// iterates reports whether a checked expression holds a comprehension.
func iterates(a *cel.Ast) bool {
	found := celast.MatchDescendants(celast.NavigateAST(a.NativeRep()), celast.KindMatcher(celast.ComprehensionKind))
	return len(found) > 0
}

func (c *compiler) scopeEnv(scope Scope) (*cel.Env, error) {
	// The variables scope is rebuilt for each variable: each one sees the
	// fields declared before it. The others are built once per policy,
	// after the variables are known.
	if c.envs[scope] == nil || scope == ScopeVariable {
		env, err := c.env.scopeEnv(scope, c.vars)
		if err != nil {
			return nil, err
		}
		c.envs[scope] = env
		c.untrackedEnvs[scope] = nil
	}
	return c.envs[scope], nil
}

// untrackedEnv is the untracked environment of scope, whose environment is env.
func (c *compiler) untrackedEnv(scope Scope, env *cel.Env) (*cel.Env, error) {
	if c.untrackedEnvs[scope] == nil {
		plain, err := untrackedEnv(env)
		if err != nil {
			return nil, err
		}
		c.untrackedEnvs[scope] = plain
	}
	return c.untrackedEnvs[scope], nil
}

// estimate is the worst-case cost of a checked expression of scope.
func (c *compiler) estimate(scope Scope, env *cel.Env, ast *cel.Ast) (checker.CostEstimate, error) {
	return env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: c.sizes(scope)})
}

func (c *compiler) sizes(scope Scope) *sizeEstimator {
	roots := map[string]*apiservercel.DeclType{}
	for _, name := range scope.Variables() {
		if name == VarVariables {
			roots[name] = c.vars
		} else if t := c.env.types[name]; t != nil {
			roots[celName(name)] = t.decl
		}
	}
	return &sizeEstimator{roots: roots}
}

// declTypeOf gives a variable's result type the declaration the variables
// object needs, so that later expressions are checked against it.
func declTypeOf(t *cel.Type) *apiservercel.DeclType {
	switch {
	case t.IsExactType(cel.BoolType):
		return apiservercel.BoolType
	case t.IsExactType(cel.IntType):
		return apiservercel.IntType
	case t.IsExactType(cel.UintType):
		return apiservercel.UintType
	case t.IsExactType(cel.DoubleType):
		return apiservercel.DoubleType
	case t.IsExactType(cel.StringType):
		return apiservercel.StringType
	case t.IsExactType(cel.BytesType):
		return apiservercel.BytesType
	case t.IsExactType(cel.DurationType):
		return apiservercel.DurationType
	case t.IsExactType(cel.TimestampType):
		return apiservercel.TimestampType
	}
	params := t.Parameters()
	switch {
	case t.Kind() == cel.ListType(cel.DynType).Kind() && len(params) == 1:
		return apiservercel.NewListType(declTypeOf(params[0]), -1)
	case t.Kind() == cel.MapType(cel.DynType, cel.DynType).Kind() && len(params) == 2:
		return apiservercel.NewMapType(declTypeOf(params[0]), declTypeOf(params[1]), -1)
	}
	return apiservercel.DynType
}

// DecodePolicy decodes one stored CleanupPolicy, as JSON objects decode,
// as the typed API would. A field the typed API cannot hold (a timeout
// stored before the schema refused a word) is returned as an error naming
// it; the policy returned then carries the metadata and the status only,
// enough to report on it. obj is not changed.
func DecodePolicy(obj map[string]any) (*v1alpha1.CleanupPolicy, field.ErrorList) {
	p := &v1alpha1.CleanupPolicy{}
	err := decodeInto(obj, p)
	if err == nil {
		return p, nil
	}
	p = &v1alpha1.CleanupPolicy{}
	p.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicy"))
	// The API server validated the metadata; a status it let through that
	// does not decode is left out, and rewritten by the next status patch.
	md, _ := obj["metadata"].(map[string]any)
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(md, &p.ObjectMeta)
	if st, ok := obj["status"].(map[string]any); ok {
		if decodeInto(st, &p.Status) != nil {
			p.Status = v1alpha1.CleanupPolicyStatus{}
		}
	}
	errs := locate(field.NewPath("spec"), obj["spec"], reflect.TypeFor[v1alpha1.CleanupPolicySpec]())
	if len(errs) == 0 {
		errs = field.ErrorList{field.Invalid(field.NewPath("spec"), field.OmitValueType{}, undecodable(err))}
	}
	return p, errs
}

// decodeInto decodes a stored value into out through JSON, as the typed
// client does: an integer that overflows its field, or a duration that
// does not parse, is an error here, not a truncated value.
func decodeInto(v any, out any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
var jsonUnmarshaler = reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]()

// locate finds the fields of v that do not decode into t, deepest first:
// it descends into the fields, items and entries that fail, and reports a
// value that fails while all its parts decode, or that has no parts.
func locate(path *field.Path, v any, t reflect.Type) field.ErrorList {
	err := decodeInto(v, reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	leaf := func() field.ErrorList {
		var value any = field.OmitValueType{}
		switch v.(type) {
		case string, bool, int64, float64, nil:
			value = v
		}
		return field.ErrorList{field.Invalid(path, value, undecodable(err))}
	}
	custom := reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
	var errs field.ErrorList
	switch {
	case t.Kind() == reflect.Pointer:
		return locate(path, v, t.Elem())
	case custom:
		return leaf()
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return leaf()
		}
		errs = locateFields(path, m, t)
	case t.Kind() == reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return leaf()
		}
		for i, item := range items {
			errs = append(errs, locate(path.Index(i), item, t.Elem())...)
		}
	case t.Kind() == reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return leaf()
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, locate(path.Key(k), m[k], t.Elem())...)
		}
	}
	if len(errs) == 0 {
		return leaf()
	}
	return errs
}

// locateFields finds the fields of the object m that do not decode into
// the fields of the struct t, as locate does.
func locateFields(path *field.Path, m map[string]any, t reflect.Type) field.ErrorList {
	var errs field.ErrorList
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && (f.Anonymous || strings.Contains(opts, "inline")):
			errs = append(errs, locate(path, m, f.Type)...)
		case name != "":
			if fv, ok := m[name]; ok {
				errs = append(errs, locate(path.Child(name), fv, f.Type)...)
			}
		}
	}
	return errs
}

func undecodable(err error) string {
	return "stored, but the operator cannot read it: " + err.Error()
}

// Cache holds compiled policies by (UID, generation). A policy is compiled
// once per generation, errors included: a broken generation is not
// recompiled on every reconcile, and the next generation always is.
type Cache struct {
	env          *Env
	mu           sync.Mutex
	entries      map[types.UID]*cacheEntry
	compilations atomic.Int64
}

type cacheEntry struct {
	generation int64
	policy     *Policy
	errs       field.ErrorList
}

// NewCache returns an empty cache compiling with env.
func NewCache(env *Env) *Cache {
	return &Cache{env: env, entries: map[types.UID]*cacheEntry{}}
}

// Get returns the compiled policy for p's UID and generation, compiling it
// if the cache holds another generation or none.
func (c *Cache) Get(p *v1alpha1.CleanupPolicy) (*Policy, field.ErrorList) {
	return c.Load(p.UID, p.Generation, func() (*v1alpha1.CleanupPolicy, field.ErrorList) { return p, nil })
}

// Load returns the compiled policy of the given UID and generation. When the
// cache holds another generation or none, it calls decode for the policy
// and compiles it; the errors of a policy that does not decode are kept as
// its compile errors are, so a stored policy is decoded once per generation.
func (c *Cache) Load(uid types.UID, generation int64, decode func() (*v1alpha1.CleanupPolicy, field.ErrorList)) (*Policy, field.ErrorList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[uid]; ok && e.generation == generation {
		return e.policy, e.errs
	}
	c.compilations.Add(1)
	p, errs := decode()
	var policy *Policy
	if len(errs) == 0 {
		policy, errs = Compile(c.env, p)
	}
	c.entries[uid] = &cacheEntry{generation: generation, policy: policy, errs: errs}
	return policy, errs
}

// Retain forgets every policy whose UID is not in live.
func (c *Cache) Retain(live sets.Set[types.UID]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.entries {
		if !live.Has(uid) {
			delete(c.entries, uid)
		}
	}
}

// Compilations counts the compilations the cache has run.
func (c *Cache) Compilations() int64 { return c.compilations.Load() }

// Len is the number of policies cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
