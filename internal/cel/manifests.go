package cel

import (
	"slices"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
)

// ManifestIdentity are the fields of a manifest that the operator's cache
// keeps of every ManifestWork (internal/snapshot.CompactManifest): what
// names the object a manifest creates, and so an orphaned manifest. An
// orphaning rule that reads nothing else of `manifest`, and nothing of
// `work.spec.workload`, decides the same on the cached work as on the
// stored one.
var ManifestIdentity = [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"}}

// ReadsManifests says whether an orphaning rule of the policy reads more of
// a work's manifests than ManifestIdentity: such a policy's decisions read
// the manifests from the API server, not from the cache.
func (p *Policy) ReadsManifests() bool {
	return slices.ContainsFunc(p.Orphaning, func(e *Expression) bool { return e != nil && e.readsManifests })
}

// readsManifests says whether a checked orphaning rule may read a manifest
// beyond ManifestIdentity: through `manifest`, or through
// `work.spec.workload`. It errs on the side of reading: any use of either
// variable that is not a chain of constant field selections to an allowed
// field (a whole object passed to a function, compared, iterated, or
// indexed by a computed key) counts as reading everything.
func readsManifests(a *cel.Ast) bool {
	idents := celast.MatchDescendants(celast.NavigateAST(a.NativeRep()), celast.KindMatcher(celast.IdentKind))
	for _, id := range idents {
		switch id.AsIdent() {
		case VarManifest:
			if !slices.ContainsFunc(ManifestIdentity, func(allowed []string) bool { return slices.Equal(accessPath(id), allowed) }) {
				return true
			}
		case VarWork:
			path := accessPath(id)
			switch {
			case len(path) == 0:
				return true // the whole work
			case path[0] == "spec" && (len(path) < 2 || path[1] == "workload"):
				return true
			}
		}
	}
	return false
}

// accessPath is the chain of constant field names an identifier is
// selected by (`x.a.b`, `x['a']`, `x.?a`, `has(x.a)`), outermost last.
func accessPath(id celast.NavigableExpr) []string {
	var path []string
	cur := id
	for {
		parent, ok := cur.Parent()
		if !ok {
			return path
		}
		name, ok := fieldOf(parent, cur)
		if !ok {
			return path
		}
		path = append(path, name)
		cur = parent
	}
}

// fieldOf is the field parent selects of operand, when parent is a
// selection by a constant name.
func fieldOf(parent, operand celast.NavigableExpr) (string, bool) {
	switch parent.Kind() {
	case celast.SelectKind:
		return parent.AsSelect().FieldName(), true
	case celast.CallKind:
		call := parent.AsCall()
		switch call.FunctionName() {
		case operators.Index, operators.OptIndex, operators.OptSelect:
		default:
			return "", false
		}
		args := call.Args()
		if len(args) != 2 || args[0].ID() != operand.ID() || args[1].Kind() != celast.LiteralKind {
			return "", false
		}
		name, ok := args[1].AsLiteral().Value().(string)
		return name, ok
	}
	return "", false
}
