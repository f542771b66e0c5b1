package cel

import (
	"context"

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
// budget. Evaluations on it are the reference the operator's adapter must match.
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

// Untracked reports whether e has a program without cost tracking.
func (e *Expression) Untracked() bool { return e.untracked != nil }

// EvalUntracked evaluates e with its untracked program alone and returns
// the estimate it would be charged. The budget is not charged.
func (e *Expression) EvalUntracked(a *Activation) (ref.Val, uint64, error) {
	val, _, err := e.evalDetails(e.untracked, a)
	return val, e.charge, err
}

// EvalTracked evaluates e with its tracked program alone, as evalCost does
// where e has no untracked program or the budget does not hold its estimate.
func (e *Expression) EvalTracked(a *Activation) (ref.Val, uint64, error) { return e.evalTracked(a) }

// EvalUntrackedWithin evaluates e with its untracked program until ctx ends.
func (e *Expression) EvalUntrackedWithin(ctx context.Context, a *Activation) error {
	_, _, err := e.untracked.ContextEval(ctx, a)
	return err
}
