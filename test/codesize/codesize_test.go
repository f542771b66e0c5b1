package codesize

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

const (
	maxFileLines = 800
	maxFuncLines = 120
)

// TestSizeLimits walks every module of the repository (the operator's and
// the nested ones under hack/ and test/) and names each file and function
// over its limit.
func TestSizeLimits(t *testing.T) {
	root := testenv.RepoRoot()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		problems, generated, err := oversized(path)
		if err != nil {
			return err
		}
		if generated {
			return nil
		}
		checked++
		for _, p := range problems {
			t.Errorf("%s: %s", rel, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A walk that finds nothing (a moved root, say) must not pass.
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s: expected the whole repository", checked, root)
	}
}

// skipDir leaves out what is not the project's code: the downloaded tools
// in bin, test inputs, and hidden directories such as .git.
func skipDir(name string) bool {
	return name == "bin" || name == "testdata" || name == "vendor" ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// oversized parses one file and describes what in it is over a limit. A
// function's length runs from the first line of its doc comment to its
// closing brace, as a reader meets it.
func oversized(path string) (problems []string, generated bool, err error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, false, err
	}
	if ast.IsGenerated(f) {
		return nil, true, nil
	}
	if n := strings.Count(string(src), "\n"); n > maxFileLines {
		problems = append(problems, fmt.Sprintf("%d lines, over %d", n, maxFileLines))
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		start := fn.Pos()
		if fn.Doc != nil {
			start = fn.Doc.Pos()
		}
		n := fset.Position(fn.End()).Line - fset.Position(start).Line + 1
		if n > maxFuncLines {
			problems = append(problems, fmt.Sprintf("func %s is %d lines (line %d), over %d",
				funcName(fn), n, fset.Position(start).Line, maxFuncLines))
		}
	}
	return problems, false, nil
}

// funcName names a method with its receiver's type, so two methods of one
// name in a file are told apart.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch x := t.(type) {
	case *ast.Ident:
		return x.Name + "." + fn.Name.Name
	case *ast.IndexExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	case *ast.IndexListExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "." + fn.Name.Name
		}
	}
	return fn.Name.Name
}
