package cel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apiserver/pkg/cel/lazy"
	"k8s.io/apiserver/pkg/cel/library"
)

// ErrBudgetExhausted is returned once a reconcile has spent its cost budget.
var ErrBudgetExhausted = errors.New("CEL cost budget for this reconcile exhausted")

// EvalError is a run-time failure of one expression. It is never taken as
// true or false: the decision that needed it is not taken.
type EvalError struct {
	Path string
	Err  error
}

func (e *EvalError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *EvalError) Unwrap() error { return e.Err }

// Budget is the cost one reconcile may spend on evaluation. It is safe for
// concurrent use.
type Budget struct {
	remaining atomic.Int64
	// reserve is what estimates leave for tracked evaluations (see
	// spendEstimate).
	reserve int64
}

// NewBudget returns a budget of the given cost.
func NewBudget(cost int64) *Budget {
	b := &Budget{reserve: cost / 2}
	b.remaining.Store(cost)
	return b
}

// Remaining is the cost left.
func (b *Budget) Remaining() int64 { return b.remaining.Load() }

// Refill gives the budget the given cost again, as NewBudget would: a
// reconcile that decides many objects under one binding gives each the
// budget it would have had alone. It must not run beside an evaluation.
func (b *Budget) Refill(cost int64) {
	b.reserve = cost / 2
	b.remaining.Store(cost)
}

func (b *Budget) spend(cost int64) { b.remaining.Add(-cost) }

// Activation binds the variables of one evaluation. Variables are computed
// lazily, at most once per activation, and shared with the activations
// derived from it by With.
type Activation struct {
	ctx    context.Context
	budget *Budget
	policy *Policy
	// bound holds the objects bound, converted, by slot; nil is unbound.
	bound [numSlots]any
	vars  *lazy.MapValue
}

// The slots of the variables an activation may bind.
const (
	slotCluster = iota
	slotNamespace
	slotObject
	slotWork
	slotManifest
	slotPolicy
	numSlots
)

// slotOf is the slot of the variable with the CEL name name.
func slotOf(name string) (int, bool) {
	switch name {
	case VarCluster:
		return slotCluster, true
	case nsIdent:
		return slotNamespace, true
	case VarObject:
		return slotObject, true
	case VarWork:
		return slotWork, true
	case VarManifest:
		return slotManifest, true
	case VarPolicy:
		return slotPolicy, true
	}
	return 0, false
}

// Bind starts the activations for one cluster. cluster may be nil, where no
// ManagedCluster exists (a standalone ConfigurationPolicy): it is then null.
func (p *Policy) Bind(ctx context.Context, budget *Budget, cluster map[string]any) *Activation {
	a := &Activation{ctx: ctx, budget: budget, policy: p, vars: p.noVars}
	a.bound[slotCluster] = p.env.value(VarCluster, cluster)
	if len(p.Spec.Variables) == 0 {
		// Nothing to compute: the empty map is shared.
		return a
	}
	a.vars = lazy.NewMapValue(p.vars.CelType())
	for i, v := range p.Spec.Variables {
		expr := p.Variables[i]
		a.vars.Append(v.Name, func(*lazy.MapValue) ref.Val {
			val, err := expr.eval(a)
			if err != nil {
				return types.WrapErr(err)
			}
			return val
		})
	}
	return a
}

// With returns an activation that also binds name to obj. Variables already
// computed are shared.
func (a *Activation) With(name string, obj map[string]any) *Activation {
	slot, ok := slotOf(celName(name))
	if !ok {
		panic(fmt.Sprintf("cel: no variable %q to bind", name))
	}
	out := *a
	out.bound[slot] = a.policy.env.value(name, obj)
	return &out
}

// ResolveName implements interpreter.Activation.
func (a *Activation) ResolveName(name string) (any, bool) {
	if name == VarVariables {
		return a.vars, true
	}
	slot, ok := slotOf(name)
	if !ok || a.bound[slot] == nil {
		return nil, false
	}
	return a.bound[slot], true
}

// Parent implements interpreter.Activation.
func (a *Activation) Parent() interpreter.Activation { return nil }

// Bool evaluates an expression that yields bool.
func (e *Expression) Bool(a *Activation) (bool, error) {
	val, err := e.eval(a)
	if err != nil {
		return false, err
	}
	b, ok := val.(types.Bool)
	if !ok {
		return false, &EvalError{Path: e.Path.String(), Err: fmt.Errorf("must evaluate to bool, but evaluated to %s", val.Type().TypeName())}
	}
	return bool(b), nil
}

func (e *Expression) eval(a *Activation) (ref.Val, error) {
	val, _, err := e.evalCost(a)
	return val, err
}

// evalCost evaluates the expression, spends its cost from the budget and
// returns it: the cost of this expression alone, not of the variables it
// computed on the way. An expression whose estimate bounds its cost is run
// untracked and charged the estimate while the budget holds it (see
// untracked.go); otherwise its program counts the cost as it runs.
func (e *Expression) evalCost(a *Activation) (ref.Val, uint64, error) {
	if a.budget.Remaining() <= 0 {
		return nil, 0, &EvalError{Path: e.Path.String(), Err: ErrBudgetExhausted}
	}
	if err := a.ctx.Err(); err != nil {
		// The reconcile is over: evaluate nothing more for it. (A running
		// evaluation is bounded by its own deadline, not by ctx.)
		return nil, 0, &EvalError{Path: e.Path.String(), Err: err}
	}
	if e.untracked != nil && a.budget.spendEstimate(int64(e.charge)) {
		val, _, err := e.evalDetails(e.untracked, a)
		return val, e.charge, err
	}
	return e.evalTracked(a)
}

// evalTracked evaluates the expression with its tracked program and spends
// the cost the program counted.
func (e *Expression) evalTracked(a *Activation) (ref.Val, uint64, error) {
	var cost uint64
	val, details, err := e.evalDetails(e.program, a)
	if details != nil && details.ActualCost() != nil {
		cost = *details.ActualCost()
		a.budget.spend(int64(min(cost, math.MaxInt64)))
	}
	return val, cost, err
}

// evalDetails evaluates the expression with prog, a comprehension within
// its deadline, and names the field that failed.
func (e *Expression) evalDetails(prog cel.Program, a *Activation) (ref.Val, *cel.EvalDetails, error) {
	var (
		val     ref.Val
		details *cel.EvalDetails
		err     error
	)
	if e.iterates {
		// Only a comprehension checks for interruption: bound it in time.
		val, details, err = prog.ContextEval(evalDeadlines.context(time.Now()), a)
	} else {
		val, details, err = prog.Eval(a)
	}
	if err != nil {
		var inner *EvalError
		if errors.As(err, &inner) {
			// A variable failed: report the variable's path, not the caller's.
			return nil, details, inner
		}
		return nil, details, &EvalError{Path: e.Path.String(), Err: err}
	}
	return val, details, nil
}

// value converts an object for the variable name: through its schema where
// the variable is typed, so field names are escaped as the checker expects.
// metadata.labels and metadata.annotations are always present, so that
// `cluster.metadata.labels[?'x']` works on objects without labels.
func (e *Env) value(name string, obj map[string]any) any {
	if obj == nil {
		return types.NullValue
	}
	if t := e.types[name]; t != nil && isObject(t.schema) && !t.schema.embedded {
		// Read in place: the object's adapter adds the maps it lacks.
		return &objectVal{value: obj, schema: t.schema, defaults: rootDefaults}
	}
	if t := e.types[name]; t != nil {
		return toVal(withMetadataMaps(obj), t.schema)
	}
	// Read in place: the adapter adds the maps it lacks.
	return &dynVal{value: obj, defaults: rootDefaults}
}

func withMetadataMaps(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	_, hasLabels := md["labels"].(map[string]any)
	_, hasAnnotations := md["annotations"].(map[string]any)
	if hasLabels && hasAnnotations {
		return obj
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	newMD := make(map[string]any, len(md)+2)
	for k, v := range md {
		newMD[k] = v
	}
	if !hasLabels {
		newMD["labels"] = map[string]any{}
	}
	if !hasAnnotations {
		newMD["annotations"] = map[string]any{}
	}
	out["metadata"] = newMD
	return out
}

// Transient reports whether an evaluation error says nothing about the
// object evaluated: the reconcile's budget ran out or the evaluation was
// interrupted for time. Such a result must not be remembered.
func Transient(err error) bool {
	if errors.Is(err, ErrBudgetExhausted) {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, interpreter.InterruptError{})
}

// An expression whose cost estimate bounds every evaluation of it is run
// by a program without cost tracking and charged its estimate: cel-go's
// tracking observes every step of the interpreter and costs more than the
// expressions policies are made of. The estimate bounds an evaluation only
// where the estimator knows the size of every value it reads: the bound
// objects' schemas, or the largest object the API server stores. It does
// not where a value is dynamic (cel-go's estimator charges no field
// selection on a dynamic operand, while the tracker charges each, and a
// dynamic string may fill the object where the estimator allows half of
// it), nor where it reads variables (a variable may build a string or a
// list larger than any object). Those, and those estimated over the
// per-call limit, are tracked as before.

// untrackedEnv is an environment that plans the checked expressions of
// scoped without cost tracking: scoped's functions with their bindings, its
// variables, types and time zone, and of the base environment's program
// options those that change what a program returns. The base environment
// sets the others on every program it plans: the per-call cost limit, cost
// tracking and the trackers of its libraries. OptOptimize is given where a
// program is planned (see compile).
func untrackedEnv(scoped *cel.Env) (*cel.Env, error) {
	fns := make([]*decls.FunctionDecl, 0, len(scoped.Functions()))
	for _, fn := range scoped.Functions() {
		fns = append(fns, fn)
	}
	return cel.NewCustomEnv(
		// Its decorator evaluates the alternative of or() and orValue()
		// only where needed. Before the type provider: it registers its
		// types in cel-go's own registry.
		cel.OptionalTypes(),
		// It compiles a constant pattern of find() and findAll() once, with
		// the program.
		library.Regex(),
		cel.CustomTypeAdapter(scoped.CELTypeAdapter()),
		cel.CustomTypeProvider(scoped.CELTypeProvider()),
		cel.FunctionDecls(fns...),
		cel.VariableDecls(scoped.Variables()...),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
	)
}

// boundedBy reports whether est bounds the cost of every evaluation of the
// checked expression, within the per-call limit (see above).
func boundedBy(a *cel.Ast, est checker.CostEstimate) bool {
	if est.Max > PerCallCostLimit {
		return false
	}
	for _, t := range a.NativeRep().TypeMap() {
		if dynamic(t) {
			return false
		}
	}
	for _, ref := range a.NativeRep().ReferenceMap() {
		if ref.Name == VarVariables {
			return false
		}
	}
	return !selectsOnOptional(a.NativeRep()) && !buildsValues(a.NativeRep())
}

// passThrough are the calls that return a string, bytes, a list or a map
// only by reading or passing on one the expression holds: the estimator
// knows their sizes. Concatenation adds the two sizes.
var passThrough = map[string]bool{
	"_[_]": true, "_[?_]": true, "_?._": true, "_?_:_": true, "_+_": true,
	"orValue": true, "value": true, "or": true, "optional.of": true, "optional.ofNonZeroValue": true,
}

// buildsValues reports whether the expression calls a function that builds
// a string, bytes, a list or a map from others (split, replace, join,
// format, ...): the library's estimate of its size is not always a bound
// (an empty string split is estimated empty, and is a list of one).
func buildsValues(a *celast.AST) bool {
	found := celast.MatchDescendants(celast.NavigateAST(a), func(n celast.NavigableExpr) bool {
		if n.Kind() != celast.CallKind || passThrough[n.AsCall().FunctionName()] {
			return false
		}
		switch a.GetType(n.ID()).Kind() {
		case types.StringKind, types.BytesKind, types.ListKind, types.MapKind:
			return true
		}
		return false
	})
	return len(found) > 0
}

// selectsOnOptional reports whether the expression reads a field of an
// optional value (optional.of(x).name): the estimator charges a field
// selection on a map or an object only, the tracker every one.
func selectsOnOptional(a *celast.AST) bool {
	found := celast.MatchDescendants(celast.NavigateAST(a), func(n celast.NavigableExpr) bool {
		if n.Kind() != celast.SelectKind {
			return false
		}
		t := a.GetType(n.AsSelect().Operand().ID())
		return t.Kind() == types.OpaqueKind && t.TypeName() == types.OptionalType.TypeName()
	})
	return len(found) > 0
}

// dynamic reports whether a checked type is, or holds, a value whose size
// the estimator cannot know.
func dynamic(t *types.Type) bool {
	switch t.Kind() {
	case types.DynKind, types.AnyKind, types.TypeParamKind, types.ErrorKind:
		return true
	}
	for _, p := range t.Parameters() {
		if dynamic(p) {
			return true
		}
	}
	return false
}

// spendEstimate spends est if the budget holds it beyond its reserve, and
// reports whether it did. Estimates bound the worst object, not this one: a
// selector over a list the schema does not bound is estimated hundreds of
// thousands and costs tens. So estimates may take at most the budget less
// its reserve, half of it; past that, evaluations are tracked and charged
// what they cost. A fleet whose evaluations cost at most the reserve is
// evaluated in full, as it was when every evaluation was tracked, and no
// evaluation costs more than it is charged.
func (b *Budget) spendEstimate(est int64) bool {
	for {
		left := b.remaining.Load()
		if left-est < b.reserve {
			return false
		}
		if b.remaining.CompareAndSwap(left, left-est) {
			return true
		}
	}
}
