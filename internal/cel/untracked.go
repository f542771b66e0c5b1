package cel

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/types"
	"k8s.io/apiserver/pkg/cel/library"
)

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
