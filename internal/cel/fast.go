package cel

import (
	"math"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/parser"
)

// The fast path evaluates the expressions most policies are made of
// (field selections, optional look-ups, equality, the logical operators,
// prefix and suffix tests and exists/all over a list) directly on the
// bound objects, computing the cost the tracked program would charge for
// the same evaluation, without the program's per-step cost tracking.
//
// It only answers an evaluation it can finish without an error: on a
// missing field, a value of an unexpected type, a map to iterate or a cost
// past the per-call limit it gives up, and the tracked program evaluates
// the expression from the start, so every error, and every result that
// depends on one (`error || true`), is the program's own. An expression
// with a node outside this subset has no fast path at all.
// TestFastPathMatchesProgram and FuzzCompile hold both to the same values
// and costs.

// fastNode is one node of an expression on the fast path. eval returns
// nil to give up.
type fastNode interface {
	eval(f *fastFrame) ref.Val
}

// maxFastDepth is how deeply comprehensions may nest on the fast path.
const maxFastDepth = 4

// fastFrame is the state of one evaluation.
type fastFrame struct {
	a    *Activation
	cost uint64
	// iter holds the iteration variables of the enclosing comprehensions.
	iter [maxFastDepth]ref.Val
}

// fastEval evaluates n on a and returns its value and cost, or false to
// leave the evaluation to the program.
func fastEval(n fastNode, a *Activation) (ref.Val, uint64, bool) {
	f := fastFrame{a: a}
	v := n.eval(&f)
	if v == nil || f.cost > PerCallCostLimit {
		return nil, 0, false
	}
	return v, f.cost, true
}

// fastCompiler translates a checked expression into fast nodes.
type fastCompiler struct {
	ast *celast.AST
	// iterVars are the iteration variables in scope, outermost first.
	iterVars []string
}

// compileFast returns the fast path of a checked expression, or nil when
// the expression has a node outside the subset.
func compileFast(a *celast.AST) fastNode {
	c := &fastCompiler{ast: a}
	n, ok := c.node(a.Expr())
	if !ok {
		return nil
	}
	return n
}

func (c *fastCompiler) node(e celast.Expr) (fastNode, bool) {
	switch e.Kind() {
	case celast.IdentKind, celast.SelectKind:
		if e.Kind() == celast.SelectKind && e.AsSelect().IsTestOnly() {
			return c.presence(e)
		}
		return c.attribute(e)
	case celast.CallKind:
		return c.call(e)
	case celast.ComprehensionKind:
		return c.comprehension(e)
	}
	return nil, false
}

// overload is the single overload the checker chose for a call, or "".
func (c *fastCompiler) overload(e celast.Expr) string {
	ids := c.ast.GetOverloadIDs(e.ID())
	if len(ids) != 1 {
		return ""
	}
	return ids[0]
}

// isLiteral reports whether e is a literal the fast path takes as an
// operand: a string, an integer, a boolean or null.
func isLiteral(e celast.Expr) (ref.Val, bool) {
	if e.Kind() != celast.LiteralKind {
		return nil, false
	}
	switch v := e.AsLiteral().(type) {
	case types.String, types.Int, types.Bool, types.Null:
		return v, true
	}
	return nil, false
}

// operand compiles an argument that may be a literal. A call whose
// arguments are all literals is left to the program, which folds it.
func (c *fastCompiler) operand(e celast.Expr) (fastNode, bool, bool) {
	if v, ok := isLiteral(e); ok {
		return fastConst{v}, true, true
	}
	n, ok := c.node(e)
	return n, false, ok
}

func (c *fastCompiler) call(e celast.Expr) (fastNode, bool) {
	call := e.AsCall()
	args := call.Args()
	fn := call.FunctionName()
	switch {
	case !call.IsMemberFunction() && (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2:
		want := overloads.Equals
		if fn == operators.NotEquals {
			want = overloads.NotEquals
		}
		if c.overload(e) != want {
			return nil, false
		}
		l, lLit, ok := c.operand(args[0])
		if !ok {
			return nil, false
		}
		r, rLit, ok := c.operand(args[1])
		if !ok || lLit && rLit {
			return nil, false
		}
		return &fastEq{lhs: l, rhs: r, negate: fn == operators.NotEquals}, true
	case !call.IsMemberFunction() && (fn == operators.LogicalAnd || fn == operators.LogicalOr) && len(args) == 2:
		var terms []fastNode
		for _, arg := range args {
			n, ok := c.node(arg) // a literal term is left to the program
			if !ok {
				return nil, false
			}
			terms = append(terms, n)
		}
		return &fastLogic{terms: terms, or: fn == operators.LogicalOr}, true
	case !call.IsMemberFunction() && fn == operators.LogicalNot && len(args) == 1:
		if c.overload(e) != overloads.LogicalNot {
			return nil, false
		}
		n, ok := c.node(args[0])
		if !ok {
			return nil, false
		}
		return &fastNot{n}, true
	case call.IsMemberFunction() && len(args) == 1 && (fn == "startsWith" || fn == "endsWith" || fn == "contains"):
		id := c.overload(e)
		if id != overloads.StartsWithString && id != overloads.EndsWithString && id != overloads.ContainsString {
			return nil, false
		}
		s, sLit, ok := c.operand(call.Target())
		if !ok {
			return nil, false
		}
		sub, subLit, ok := c.operand(args[0])
		if !ok || sLit && subLit {
			return nil, false
		}
		return &fastString{s: s, sub: sub, overload: id}, true
	case call.IsMemberFunction() && fn == "orValue" && len(args) == 1:
		if c.overload(e) != "optional_orValue_value" {
			return nil, false
		}
		def, ok := isLiteral(args[0])
		if !ok {
			return nil, false
		}
		opt, ok := c.optional(call.Target())
		if !ok {
			return nil, false
		}
		opt.def = def
		return opt, true
	case !call.IsMemberFunction() && fn == operators.Index && len(args) == 2:
		return c.attribute(e)
	}
	return nil, false
}

// optional compiles `<attribute>.?<field>` or `<attribute>[?<string>]`,
// and chains of them (`<attribute>.?<field>.?<field>`).
func (c *fastCompiler) optional(e celast.Expr) (*fastOrValue, bool) {
	if e.Kind() != celast.CallKind {
		return nil, false
	}
	call := e.AsCall()
	args := call.Args()
	if call.IsMemberFunction() || len(args) != 2 || (call.FunctionName() != operators.OptSelect && call.FunctionName() != operators.OptIndex) {
		return nil, false
	}
	key, ok := isLiteral(args[1])
	if !ok {
		return nil, false
	}
	if _, isString := key.(types.String); !isString {
		return nil, false
	}
	if inner, ok := c.optional(args[0]); ok {
		inner.keys = append(inner.keys, key)
		return inner, true
	}
	attr, ok := c.chain(args[0])
	if !ok {
		return nil, false
	}
	return &fastOrValue{attr: attr, keys: []ref.Val{key}}, true
}

// attribute compiles a chain of field selections and constant string
// indexes from a variable or an iteration variable: the program reads it
// as one attribute, at a cost of one for the variable and one for each
// qualifier.
func (c *fastCompiler) attribute(e celast.Expr) (fastNode, bool) {
	a, ok := c.chain(e)
	if !ok {
		return nil, false
	}
	return a, true
}

// chain is attribute's attribute.
func (c *fastCompiler) chain(e celast.Expr) (*fastAttr, bool) {
	switch e.Kind() {
	case celast.IdentKind:
		name := e.AsIdent()
		if ref, found := c.ast.ReferenceMap()[e.ID()]; found && ref.Name != name {
			return nil, false
		}
		for depth := len(c.iterVars) - 1; depth >= 0; depth-- {
			if c.iterVars[depth] == name {
				return &fastAttr{iter: depth, slot: -1}, true
			}
		}
		slot, ok := slotOf(name)
		if !ok {
			return nil, false
		}
		return &fastAttr{iter: -1, slot: slot}, true
	case celast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() {
			return nil, false
		}
		if _, found := c.ast.ReferenceMap()[e.ID()]; found {
			// A qualified name the checker resolved, not a field.
			return nil, false
		}
		a, ok := c.chain(sel.Operand())
		if !ok {
			return nil, false
		}
		a.quals = append(a.quals, types.String(sel.FieldName()))
		return a, true
	case celast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.IsMemberFunction() || call.FunctionName() != operators.Index || len(args) != 2 || c.overload(e) != overloads.IndexMap {
			return nil, false
		}
		key, ok := isLiteral(args[1])
		if !ok {
			return nil, false
		}
		if _, isString := key.(types.String); !isString {
			return nil, false
		}
		a, ok := c.chain(args[0])
		if !ok {
			return nil, false
		}
		a.quals = append(a.quals, key)
		return a, true
	}
	return nil, false
}

// presence compiles has(<attribute>.<field>).
func (c *fastCompiler) presence(e celast.Expr) (fastNode, bool) {
	sel := e.AsSelect()
	a, ok := c.chain(sel.Operand())
	if !ok {
		return nil, false
	}
	return &fastHas{attr: a, field: types.String(sel.FieldName())}, true
}

// comprehension compiles exists and all, as the parser expands them, over
// a list.
func (c *fastCompiler) comprehension(e celast.Expr) (fastNode, bool) {
	comp := e.AsComprehension()
	accu := comp.AccuVar()
	if comp.HasIterVar2() || (accu != parser.AccumulatorName && accu != parser.HiddenAccumulatorName) || len(c.iterVars) == maxFastDepth {
		return nil, false
	}
	iterVar := comp.IterVar()
	if _, isVar := slotOf(iterVar); isVar || iterVar == VarVariables || iterVar == accu {
		return nil, false
	}
	for _, v := range c.iterVars {
		if v == iterVar {
			return nil, false
		}
	}
	init, ok := isLiteral(comp.AccuInit())
	if !ok {
		return nil, false
	}
	var exists bool
	switch init {
	case types.False:
		exists = true
	case types.True:
	default:
		return nil, false
	}
	// exists: init false, condition @not_strictly_false(!@result), step
	// @result || pred; all: init true, condition
	// @not_strictly_false(@result), step @result && pred; result @result.
	if !isAccu(comp.Result(), accu) || !isCondition(comp.LoopCondition(), accu, exists) {
		return nil, false
	}
	step := comp.LoopStep()
	if step.Kind() != celast.CallKind {
		return nil, false
	}
	stepCall := step.AsCall()
	wantOp := operators.LogicalAnd
	if exists {
		wantOp = operators.LogicalOr
	}
	if stepCall.IsMemberFunction() || stepCall.FunctionName() != wantOp || len(stepCall.Args()) != 2 || !isAccu(stepCall.Args()[0], accu) {
		return nil, false
	}
	if k := c.ast.GetType(comp.IterRange().ID()).Kind(); k != types.ListKind && k != types.DynKind {
		// A map's keys come in no fixed order: so would the cost.
		return nil, false
	}
	iterRange, ok := c.node(comp.IterRange())
	if !ok {
		return nil, false
	}
	c.iterVars = append(c.iterVars, iterVar)
	pred, ok := c.node(stepCall.Args()[1])
	c.iterVars = c.iterVars[:len(c.iterVars)-1]
	if !ok {
		return nil, false
	}
	return &fastQuantifier{iterRange: iterRange, pred: pred, exists: exists, depth: len(c.iterVars)}, true
}

func isAccu(e celast.Expr, accu string) bool {
	return e.Kind() == celast.IdentKind && e.AsIdent() == accu
}

func isCondition(e celast.Expr, accu string, exists bool) bool {
	if e.Kind() != celast.CallKind {
		return false
	}
	call := e.AsCall()
	if call.FunctionName() != operators.NotStrictlyFalse || len(call.Args()) != 1 {
		return false
	}
	arg := call.Args()[0]
	if !exists {
		return isAccu(arg, accu)
	}
	if arg.Kind() != celast.CallKind {
		return false
	}
	not := arg.AsCall()
	return not.FunctionName() == operators.LogicalNot && len(not.Args()) == 1 && isAccu(not.Args()[0], accu)
}

// fastConst is a literal operand: it costs nothing.
type fastConst struct{ v ref.Val }

func (n fastConst) eval(*fastFrame) ref.Val { return n.v }

// fastAttr reads a variable, or an iteration variable, and the fields and
// keys of quals in turn.
type fastAttr struct {
	slot  int // the variable's slot, or -1
	iter  int // the iteration variable's depth, or -1
	quals []ref.Val
}

func (n *fastAttr) root(f *fastFrame) ref.Val {
	var v any
	if n.iter >= 0 {
		v = f.iter[n.iter]
	} else {
		v = f.a.bound[n.slot]
	}
	rv, ok := v.(ref.Val)
	if !ok || types.IsUnknownOrError(rv) {
		return nil
	}
	return rv
}

func (n *fastAttr) eval(f *fastFrame) ref.Val {
	v := n.root(f)
	if v == nil {
		return nil
	}
	f.cost++
	for _, q := range n.quals {
		if v = find(v, q); v == nil {
			return nil
		}
		f.cost++
	}
	return v
}

// find is the value of key in v, or nil where v is not a map or lacks it.
func find(v ref.Val, key ref.Val) ref.Val {
	m, ok := v.(traits.Mapper)
	if !ok {
		return nil
	}
	out, found := m.Find(key)
	if !found || out == nil || types.IsUnknownOrError(out) {
		return nil
	}
	return out
}

// fastOrValue is `<attr>.?<key>.orValue(<def>)` or `<attr>[?<key>].orValue(<def>)`,
// with one or more optional keys: an absent key costs nothing and yields
// the default.
type fastOrValue struct {
	attr *fastAttr
	keys []ref.Val
	def  ref.Val
}

func (n *fastOrValue) eval(f *fastFrame) ref.Val {
	v := n.attr.eval(f)
	if v == nil {
		return nil
	}
	for _, key := range n.keys {
		m, ok := v.(traits.Mapper)
		if !ok {
			return nil
		}
		out, found := m.Find(key)
		if !found {
			return n.def
		}
		if out == nil || types.IsUnknownOrError(out) {
			return nil
		}
		f.cost++
		v = out
	}
	return v
}

// fastHas is has(<attr>.<field>): the test costs one, the field itself
// nothing.
type fastHas struct {
	attr  *fastAttr
	field ref.Val
}

func (n *fastHas) eval(f *fastFrame) ref.Val {
	v := n.attr.root(f)
	if v == nil {
		return nil
	}
	f.cost++
	for _, q := range n.attr.quals {
		if v = find(v, q); v == nil {
			return nil
		}
		f.cost++
	}
	m, ok := v.(traits.Mapper)
	if !ok {
		return nil
	}
	out, found := m.Find(n.field)
	if out != nil && types.IsUnknownOrError(out) {
		return nil
	}
	return types.Bool(found)
}

// isScalar says whether v is a value whose equality and size the fast path
// takes as the program does.
func isScalar(v ref.Val) bool {
	switch v.(type) {
	case types.String, types.Int, types.Uint, types.Double, types.Bool, types.Null:
		return true
	}
	return false
}

// size is the size the cost tracker gives a scalar.
func size(v ref.Val) uint64 {
	if s, ok := v.(types.String); ok {
		return uint64(s.Size().(types.Int))
	}
	return 1
}

// sizeAtLeastOne says whether the size the cost tracker gives v (a
// string's, list's or map's size, an optional's value's, else one) is at
// least one, without copying a variable's object to count its fields or
// counting a string's characters.
func sizeAtLeastOne(v ref.Val) bool {
	switch v := v.(type) {
	case *objectVal:
		// A variable's object has metadata, its metadata labels.
		return v.defaults != noDefaults || len(v.value) > 0
	case *dynVal:
		return true
	case types.String:
		return len(v) > 0
	case *types.Optional:
		return !v.HasValue() || sizeAtLeastOne(v.GetValue())
	case traits.Sizer:
		n, ok := v.Size().(types.Int)
		return !ok || n >= 1
	}
	return true
}

// traversal is the cost of traversing n characters.
func traversal(n uint64) uint64 {
	return uint64(math.Ceil(float64(n) * 0.1))
}

type fastEq struct {
	lhs, rhs fastNode
	negate   bool
}

func (n *fastEq) eval(f *fastFrame) ref.Val {
	l := n.lhs.eval(f)
	if l == nil {
		return nil
	}
	r := n.rhs.eval(f)
	if r == nil {
		return nil
	}
	switch {
	case isScalar(l) && isScalar(r):
		f.cost += traversal(min(size(l), size(r)))
	case l == types.NullValue || r == types.NullValue:
		// Anything but null is unequal to null, whatever its type. The
		// tracker charges the smaller size, a tenth rounded up: null's is
		// one, so the cost is one unless the other is empty.
		if sizeAtLeastOne(l) && sizeAtLeastOne(r) {
			f.cost++
		}
	default:
		return nil
	}
	eq := types.Equal(l, r)
	if n.negate {
		return types.Bool(eq != types.True)
	}
	return eq
}

// fastLogic is && or ||: the terms in order, stopping at the first that
// decides. A term that is not a bool leaves the evaluation to the program.
type fastLogic struct {
	terms []fastNode
	or    bool
}

func (n *fastLogic) eval(f *fastFrame) ref.Val {
	for _, t := range n.terms {
		b, ok := t.eval(f).(types.Bool)
		if !ok {
			return nil
		}
		if bool(b) == n.or {
			return b
		}
	}
	return types.Bool(!n.or)
}

type fastNot struct{ n fastNode }

func (n *fastNot) eval(f *fastFrame) ref.Val {
	b, ok := n.n.eval(f).(types.Bool)
	if !ok {
		return nil
	}
	f.cost++
	return !b
}

// fastString is startsWith, endsWith or contains on strings.
type fastString struct {
	s, sub   fastNode
	overload string
}

func (n *fastString) eval(f *fastFrame) ref.Val {
	sv := n.s.eval(f)
	if sv == nil {
		return nil
	}
	subv := n.sub.eval(f)
	s, ok := sv.(types.String)
	sub, subOK := subv.(types.String)
	if !ok || !subOK {
		return nil
	}
	switch n.overload {
	case overloads.StartsWithString:
		f.cost += traversal(size(sub))
		return types.Bool(strings.HasPrefix(string(s), string(sub)))
	case overloads.EndsWithString:
		f.cost += traversal(size(sub))
		return types.Bool(strings.HasSuffix(string(s), string(sub)))
	default:
		f.cost += traversal(size(s)) * traversal(size(sub))
		return types.Bool(strings.Contains(string(s), string(sub)))
	}
}

// fastQuantifier is exists or all over a list, with the cost of the
// expanded comprehension: the condition (3 for exists, 2 for all) before
// each element, the accumulator (1) and the predicate for each element
// the condition lets through, and the accumulator once more at the end.
type fastQuantifier struct {
	iterRange fastNode
	pred      fastNode
	exists    bool
	depth     int
}

func (n *fastQuantifier) eval(f *fastFrame) ref.Val {
	r := n.iterRange.eval(f)
	if r == nil {
		return nil
	}
	list, ok := r.(traits.Lister)
	if !ok {
		return nil
	}
	condCost := uint64(2)
	if n.exists {
		condCost = 3
	}
	acc := types.Bool(!n.exists)
	it := list.Iterator()
	for it.HasNext() == types.True {
		elem := it.Next()
		f.cost += condCost
		if bool(acc) == n.exists {
			// The condition stops the loop.
			break
		}
		f.iter[n.depth] = elem
		f.cost++
		b, ok := n.pred.eval(f).(types.Bool)
		if !ok || f.cost > PerCallCostLimit {
			return nil
		}
		acc = b
	}
	f.iter[n.depth] = nil
	f.cost++
	return acc
}
