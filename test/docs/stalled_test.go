package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// stalledReadings is what kstatus and Argo CD read of a policy that is
// Stalled: every such row of the conditions table says it.
const stalledReadings = "`Failed` · `Degraded`"

// TestStalledReasonsAreDocumented: the reasons the policy reconciler writes
// with Stalled=True are exactly the rows of docs/reference/api.md's policy
// conditions that say Stalled=True, and each row gives kstatus's and Argo
// CD's readings.
func TestStalledReasonsAreDocumented(t *testing.T) {
	f := readCodeFacts(t)
	code, unresolved := stalledReasonsInCode(t, f.reasons)
	for _, u := range unresolved {
		t.Errorf("cannot tell which reason reaches setStalledCondition at %s: resolve it here or pass a constant", u)
	}
	if len(code) < 5 {
		t.Fatalf("read only %d Stalled reasons from the code: %v", len(code), slices.Sorted(maps.Keys(code)))
	}
	for _, p := range stalledProblems(parseMarkdown(t, "docs/reference/api.md"), code) {
		t.Error(p)
	}
}

// TestStalledCheckCatchesMistakes plants each kind of mismatch in a copy of
// the page and sees it reported.
func TestStalledCheckCatchesMistakes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "reference", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	code, _ := stalledReasonsInCode(t, readCodeFacts(t).reasons)
	row := regexp.MustCompile("(?m)^.*`SignalRefused`.*\\n")
	for name, tc := range map[string]struct {
		edit func(string) string
		want string
	}{
		"a reason left out": {func(s string) string { return row.ReplaceAllString(s, "") }, "which no Stalled=True row lists"},
		"a reading wrong":   {func(s string) string { return strings.Replace(s, stalledReadings, "`InProgress` · `Progressing`", 1) }, "it reads"},
		"a reason made up": {func(s string) string {
			return strings.Replace(s, "| `SignalRefused` |", "| `SignalLost` |", 1)
		}, "which the code never writes with Stalled"},
	} {
		t.Run(name, func(t *testing.T) {
			planted := tc.edit(string(raw))
			if planted == string(raw) {
				t.Fatal("the plant changed nothing")
			}
			problems := stalledProblems(parseMarkdownText(t, "api.md", []byte(planted)), code)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("got %q, want a problem saying %q", problems, tc.want)
			}
		})
	}
}

// stalledProblems compares the Stalled rows of the page with the reasons of
// the code.
func stalledProblems(md markdown, code map[string]string) []string {
	docs, problems := stalledReasonsInDocs(md)
	for _, r := range slices.Sorted(maps.Keys(code)) {
		if !docs[r] {
			problems = append(problems, fmt.Sprintf("docs/reference/api.md: the policy is Stalled with reason %s (%s), which no Stalled=True row lists", r, code[r]))
		}
	}
	for _, r := range slices.Sorted(maps.Keys(docs)) {
		if code[r] == "" {
			problems = append(problems, fmt.Sprintf("docs/reference/api.md: a Stalled=True row lists %s, which the code never writes with Stalled", r))
		}
	}
	return problems
}

// stalledReasonsInDocs reads the Stalled=True rows of the policy conditions
// table: their reasons, and rows whose readings are not stalledReadings.
func stalledReasonsInDocs(md markdown) (map[string]bool, []string) {
	out, problems := map[string]bool{}, []string(nil)
	tables(md, func(line int, header, row []string) {
		col := func(name string) string {
			i := slices.IndexFunc(header, func(h string) bool { return strings.TrimSpace(h) == name })
			if i < 0 || i >= len(row) {
				return ""
			}
			return strings.TrimSpace(row[i])
		}
		if !strings.Contains(col("also"), "`Stalled=True`") {
			return
		}
		reason := strings.Trim(col("reason"), "`")
		out[reason] = true
		if got := col("kstatus · Argo CD"); got != stalledReadings {
			problems = append(problems, fmt.Sprintf("docs/reference/api.md:%d: %s is Stalled: it reads %s, not %q", line, reason, stalledReadings, got))
		}
	})
	return out, problems
}

// stalledReasonsInCode reads internal/policy for the reasons that reach
// setStalledCondition, by constant name: a constant passed to it; or a
// variable of the calling function, set from constants or from the first
// results of a function of the package returning them. What it cannot
// resolve it returns as positions.
func stalledReasonsInCode(t *testing.T, reasons map[string]string) (map[string]string, []string) {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "internal", "policy")
	fset := token.NewFileSet()
	funcs := map[string]*ast.FuncDecl{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	found, unresolved := map[string]string{}, []string(nil)
	constant := func(e ast.Expr) string {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "v1alpha1" && reasons[sel.Sel.Name] != "" {
				return sel.Sel.Name
			}
		}
		return ""
	}
	for _, fd := range funcs {
		ast.Inspect(fd, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || calleeName(call) != "setStalledCondition" || fd.Name.Name == "setStalledCondition" || len(call.Args) < 2 {
				return true
			}
			names := []string{constant(call.Args[1])}
			if id, ok := call.Args[1].(*ast.Ident); ok {
				names = assignedReasons(fd, id.Name, funcs, constant)
			}
			if len(names) == 0 || slices.Contains(names, "") {
				unresolved = append(unresolved, fset.Position(call.Pos()).String())
			}
			for _, name := range names {
				if name != "" {
					found[reasons[name]] = name
				}
			}
			return true
		})
	}
	return found, unresolved
}

// assignedReasons are the constants fn assigns to the variable v: directly,
// or as the same result of a call to a function of the package, read from
// that function's returns. "" stands for a value it cannot resolve.
func assignedReasons(fn *ast.FuncDecl, v string, funcs map[string]*ast.FuncDecl, constant func(ast.Expr) string) []string {
	var out []string
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for i, lhs := range as.Lhs {
			if id, ok := lhs.(*ast.Ident); !ok || id.Name != v {
				continue
			}
			if len(as.Rhs) == len(as.Lhs) {
				out = append(out, constant(as.Rhs[i]))
				continue
			}
			call, ok := as.Rhs[0].(*ast.CallExpr)
			callee := funcs[calleeName(call)]
			if !ok || callee == nil {
				out = append(out, "")
				continue
			}
			ast.Inspect(callee.Body, func(n ast.Node) bool {
				if _, ok := n.(*ast.FuncLit); ok {
					return false
				}
				if ret, ok := n.(*ast.ReturnStmt); ok && i < len(ret.Results) {
					if lit, ok := ret.Results[i].(*ast.BasicLit); !ok || lit.Value != `""` {
						out = append(out, constant(ret.Results[i]))
					}
				}
				return true
			})
		}
		return true
	})
	return out
}

// calleeName is the name of the function or method a call calls.
func calleeName(call *ast.CallExpr) string {
	if call == nil {
		return ""
	}
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}
