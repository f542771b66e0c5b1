package cel

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Variable names, fixed by the API contract.
const (
	VarCluster   = "cluster"
	VarNamespace = "namespace"
	VarObject    = "object"
	VarWork      = "work"
	VarManifest  = "manifest"
	VarPolicy    = "policy"
	VarVariables = "variables"
)

// Scope is the set of variables bound for one kind of field. An expression
// that names a variable outside its scope does not compile.
type Scope int

// The scopes, one per kind of field.
const (
	ScopeSelector  Scope = iota // clusterSelector
	ScopeVariable               // variables[].expression
	ScopeStrategy               // removeStrategy.rules[].when, deletionProtection
	ScopeObject                 // monitoredResources[].when, deletionStages[].when
	ScopeNamespace              // keepNamespace
	ScopeManifest               // orphaning[].when
	ScopePrune                  // prune.rules[].when
	numScopes
)

var scopeVariables = [numScopes][]string{
	ScopeSelector:  {VarCluster},
	ScopeVariable:  {VarCluster, VarVariables},
	ScopeStrategy:  {VarCluster, VarVariables},
	ScopeObject:    {VarObject, VarCluster, VarVariables},
	ScopeNamespace: {VarNamespace, VarCluster, VarVariables},
	ScopeManifest:  {VarManifest, VarWork, VarCluster, VarVariables},
	ScopePrune:     {VarPolicy, VarCluster, VarVariables},
}

// Variables names the variables bound in the scope.
func (s Scope) Variables() []string { return scopeVariables[s] }

// Cost limits. The per-call limit is the API server's; the budget bounds the
// total cost of the expressions one reconcile evaluates.
const (
	// PerCallCostLimit stops one evaluation that runs longer than about 0.1 s.
	// It is the API server's, which the base environment sets on every
	// program it plans.
	PerCallCostLimit = celconfig.PerCallLimit
	// MaxEstimatedCost refuses, at compile time, an expression whose worst
	// case on the largest object the API server stores exceeds it.
	MaxEstimatedCost = 10 * PerCallCostLimit
	// ReconcileCostBudget is the total cost one reconcile may spend.
	ReconcileCostBudget = 100 * PerCallCostLimit
	// PerCallTimeout stops one evaluation that the cost limit has not
	// stopped yet: some shapes (a comprehension over a very large list) cost
	// little per step but take the interpreter long to track.
	PerCallTimeout = 250 * time.Millisecond

	// maxObjectBytes is the largest object the API server accepts; it bounds
	// the size of lists, maps and strings whose schema does not.
	maxObjectBytes = 3 * 1024 * 1024
	// checkFrequency is how many comprehension steps run between checks of
	// the context's cancellation.
	checkFrequency = 100
)

// Env is the CEL environment: the Kubernetes base environment and libraries,
// and the variable types built from the schemas. It is built once and shared;
// it is safe for concurrent use.
type Env struct {
	base  *environment.EnvSet
	types map[string]*varType
}

// varType is how one variable is typed at compile time and converted at run time.
type varType struct {
	decl   *apiservercel.DeclType
	schema *cachedSchema
}

func (t *varType) celType() *cel.Type {
	if t == nil || t.decl == nil {
		return cel.DynType
	}
	return t.decl.CelType()
}

// NewEnv builds the environment. Schemas that are nil leave their variables dynamic.
func NewEnv(s Schemas) (*Env, error) {
	e := &Env{types: map[string]*varType{
		VarNamespace: typed("io.k8s.core.v1.Namespace", namespaceSchema()),
		VarObject:    typed("dev.fleetops.cleanup.ObjectMetadata", metadataOnlySchema()),
		VarManifest:  nil, // a manifest may be of any kind
	}}
	if s.ManagedCluster != nil {
		e.types[VarCluster] = typed("io.open_cluster_management.cluster.v1.ManagedCluster", withObjectMeta(s.ManagedCluster))
	}
	if s.ManifestWork != nil {
		e.types[VarWork] = typed("io.open_cluster_management.work.v1.ManifestWork", withObjectMeta(cachedWorkSchema(s.ManifestWork)))
	}
	if s.ConfigurationPolicy != nil {
		e.types[VarPolicy] = typed("io.open_cluster_management.policy.v1.ConfigurationPolicy", withObjectMeta(s.ConfigurationPolicy))
	}
	var decls []*apiservercel.DeclType
	for _, t := range e.types {
		if t != nil {
			decls = append(decls, t.decl)
		}
	}
	base, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		DeclTypes:         decls,
	})
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	e.base = base
	return e, nil
}

func typed(name string, s *spec.Schema) *varType {
	decl := common.SchemaDeclType(&openapi.Schema{Schema: s}, false).MaybeAssignTypeName(name)
	return &varType{decl: decl, schema: newCachedSchema(s)}
}

// Typed reports whether the variable is type-checked against a schema.
func (e *Env) Typed(variable string) bool {
	return e.types[variable] != nil
}

// scopeEnv returns the environment for one scope of one policy, whose
// variables have the type vars.
func (e *Env) scopeEnv(scope Scope, vars *apiservercel.DeclType) (*cel.Env, error) {
	var opts []cel.EnvOption
	for _, name := range scope.Variables() {
		if name == VarVariables {
			opts = append(opts, cel.Variable(name, vars.CelType()))
			continue
		}
		opts = append(opts, cel.Variable(celName(name), e.types[name].celType()))
	}
	set, err := e.base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        opts,
		DeclTypes:         []*apiservercel.DeclType{vars},
	})
	if err != nil {
		return nil, err
	}
	return set.NewExpressionsEnv(), nil
}

// celName is the identifier a variable has in the CEL environment.
func celName(variable string) string {
	if variable == VarNamespace {
		return nsIdent
	}
	return variable
}

// sizeEstimator bounds the size of lists, maps and strings for the cost
// estimate: from the schema where it says, else from the largest object.
type sizeEstimator struct {
	roots map[string]*apiservercel.DeclType
}

func (s *sizeEstimator) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	// Without a schema, a string may fill the object; a list or map element
	// (or a dynamic value, which is iterated only as one) takes at least two
	// bytes of it ("0,").
	unknown := &checker.SizeEstimate{Min: 0, Max: maxObjectBytes / 2}
	if t := node.Type(); t != nil && (t.Kind() == types.StringKind || t.Kind() == types.BytesKind) {
		unknown.Max = maxObjectBytes
	}
	path := node.Path()
	if len(path) > 0 {
		return s.bound(path, unknown)
	}
	// A value taken out of an optional (`x.?f.orValue(d)`, `.value()`) is
	// the field's value or the default: bound it as the larger of the two.
	path, def := optionalTarget(node.Expr())
	if path == nil {
		return nil
	}
	est := *s.bound(path, unknown)
	est.Max = max(est.Max, def)
	return &est
}

// bound is the size estimate of the value at path, from the schema where it
// says, else unknown.
func (s *sizeEstimator) bound(path []string, unknown *checker.SizeEstimate) *checker.SizeEstimate {
	current, ok := s.roots[path[0]]
	if !ok || current == nil {
		return unknown
	}
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			current = current.ElemType
		case "@keys":
			current = current.KeyType
		default:
			if f, ok := current.Fields[name]; ok {
				current = f.Type
			} else {
				current = nil
			}
		}
		if current == nil {
			return unknown
		}
	}
	if current.MaxElements <= 0 {
		// A list or map the schema does not bound holds at most as many
		// elements as the smallest element fits in the largest object.
		if elem := current.ElemType; elem != nil && elem.MinSerializedSize > 0 && (current.IsList() || current.IsMap()) {
			return &checker.SizeEstimate{Min: 0, Max: maxObjectBytes / (uint64(elem.MinSerializedSize) + 1)}
		}
		return unknown
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(current.MaxElements)}
}

// optionalTarget returns the path of the field an optional is unwrapped
// from, and the size of the default, when expr is
// `<path>.?<field>.orValue(<literal>)` or `<path>.?<field>.value()` with an
// empty or short literal. Otherwise nil.
func optionalTarget(expr ast.Expr) ([]string, uint64) {
	// Nodes the estimator makes up, such as a list's element, have no expression.
	if expr == nil || expr.Kind() != ast.CallKind {
		return nil, 0
	}
	call := expr.AsCall()
	var def uint64
	switch {
	case call.FunctionName() == "value" && len(call.Args()) == 0:
	case call.FunctionName() == "orValue" && len(call.Args()) == 1:
		size, ok := smallLiteral(call.Args()[0])
		if !ok {
			return nil, 0
		}
		def = size
	default:
		return nil, 0
	}
	if !call.IsMemberFunction() {
		return nil, 0
	}
	target := call.Target()
	if target.Kind() != ast.CallKind || target.AsCall().FunctionName() != operators.OptSelect {
		return nil, 0
	}
	args := target.AsCall().Args()
	if len(args) != 2 || args[1].Kind() != ast.LiteralKind {
		return nil, 0
	}
	field, ok := args[1].AsLiteral().Value().(string)
	if !ok {
		return nil, 0
	}
	base := selectPath(args[0])
	if base == nil {
		return nil, 0
	}
	return append(base, field), def
}

// selectPath is the path of a chain of field selections from a variable.
func selectPath(expr ast.Expr) []string {
	switch expr.Kind() {
	case ast.IdentKind:
		return []string{expr.AsIdent()}
	case ast.SelectKind:
		sel := expr.AsSelect()
		if sel.IsTestOnly() {
			return nil
		}
		if base := selectPath(sel.Operand()); base != nil {
			return append(base, sel.FieldName())
		}
	}
	return nil
}

// smallLiteral is the size of a default that adds little to a field's
// size bound: an empty list or map, or a scalar literal of at most 64
// bytes (a string's size is its code points, as cel-go counts them).
func smallLiteral(expr ast.Expr) (uint64, bool) {
	switch expr.Kind() {
	case ast.ListKind:
		return 0, expr.AsList().Size() == 0
	case ast.MapKind:
		return 0, expr.AsMap().Size() == 0
	case ast.LiteralKind:
		switch v := expr.AsLiteral().Value().(type) {
		case string:
			return uint64(utf8.RuneCountInString(v)), len(v) <= 64
		case []byte:
			return uint64(len(v)), len(v) <= 64
		}
		return 0, true
	}
	return 0, false
}

func (s *sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
