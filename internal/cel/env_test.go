package cel

import (
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// unwrapped is the node of an optional unwrapped with a default, as the
// cost estimator hands it to the size estimator: no path of its own.
type unwrapped struct{ expr ast.Expr }

func (n unwrapped) Path() []string                      { return nil }
func (n unwrapped) Type() *types.Type                   { return types.StringType }
func (n unwrapped) Expr() ast.Expr                      { return n.expr }
func (n unwrapped) ComputedSize() *checker.SizeEstimate { return nil }

// TestOptionalDefaultBound: a value unwrapped from an optional field is
// the field's or the default, so its size is bounded by the larger of the
// two: an estimate that took the field's alone would not bound what an
// evaluation given the default costs.
func TestOptionalDefaultBound(t *testing.T) {
	short := *apiservercel.StringType
	short.MaxElements = 3
	root := apiservercel.NewObjectType("x", map[string]*apiservercel.DeclField{
		"f": apiservercel.NewDeclField("f", &short, false, nil, nil),
	})
	env, err := cel.NewEnv(cel.OptionalTypes())
	if err != nil {
		t.Fatal(err)
	}
	s := &sizeEstimator{roots: map[string]*apiservercel.DeclType{"x": root}}
	for src, want := range map[string]uint64{
		"x.?f.orValue('abcdefgh')": 8,
		"x.?f.orValue('a')":        3,
		"x.?f.value()":             3,
	} {
		parsed, iss := env.Parse(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		got := s.EstimateSize(unwrapped{parsed.NativeRep().Expr()})
		if got == nil || got.Max != want {
			t.Errorf("%s: size %v, want at most %d", src, got, want)
		}
	}
}
