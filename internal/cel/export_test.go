package cel

import (
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types/ref"
)

// EvalCost evaluates e as the decisions do and returns its actual cost.
func (e *Expression) EvalCost(a *Activation) (ref.Val, uint64, error) { return e.evalCost(a) }

// EstimatedCost checks src, an expression of scope in p, again as Compile did
// and returns the cost estimate Compile bounded.
func EstimatedCost(p *Policy, scope Scope, src string) (checker.CostEstimate, error) {
	c := &compiler{env: p.env, vars: p.vars}
	env, err := c.scopeEnv(scope)
	if err != nil {
		return checker.CostEstimate{}, err
	}
	ast, issues := env.Compile(renameNamespace(src))
	if issues.Err() != nil {
		return checker.CostEstimate{}, issues.Err()
	}
	return c.estimate(scope, env, ast)
}

// Rename and restore the reserved word namespace, as Compile does.
var (
	RenameNamespace  = renameNamespace
	RestoreNamespace = restoreNamespace
)

// LibraryAdapted is a as the API server library's adapter alone would bind
// it: the same objects, read through common.UnstructuredToVal, charged to
// budget. Evaluations on it are the reference the fast adapter must match.
func (a *Activation) LibraryAdapted(budget *Budget) *Activation {
	out := a.policy.Bind(a.ctx, budget, nil)
	out.bound = a.bound
	for i, v := range out.bound {
		switch o := v.(type) {
		case *objectVal:
			out.bound[i] = o.library()
		case *dynVal:
			out.bound[i] = o.library()
		}
	}
	return out
}

// HasFastPath reports whether e has a fast path.
func (e *Expression) HasFastPath() bool { return e.fast != nil }

// EvalFast evaluates e on its fast path alone; ok is false where the fast
// path leaves the evaluation to the program. The budget is not charged.
func (e *Expression) EvalFast(a *Activation) (val ref.Val, cost uint64, ok bool) {
	if e.fast == nil {
		return nil, 0, false
	}
	return fastEval(e.fast, a)
}

// EvalProgram evaluates e with its tracked program alone, as evalCost
// does where the fast path gives up.
func (e *Expression) EvalProgram(a *Activation) (ref.Val, uint64, error) { return e.evalProgram(a) }
