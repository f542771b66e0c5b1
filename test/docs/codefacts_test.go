package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// wildcard stands, in a log message read from the code, for a part that is
// not a string literal (a variable, a call).
const wildcard = "\x00"

// codeFacts is what the documentation may quote, read from the code.
type codeFacts struct {
	// logMessages are the messages of Info and Error calls, each part that
	// is not a literal replaced by wildcard.
	logMessages []string
	// reasons are the values of the *Reason constants of api/v1alpha1, by
	// constant name.
	reasons map[string]string
	// eventReasons are the reasons of every Eventf call: literals, or
	// constants of api/v1alpha1.
	eventReasons map[string]bool
	// metrics are the names of the metrics the operator registers.
	metrics map[string]bool
	// admissionPolicies are the ValidatingAdmissionPolicies the operator
	// creates at start.
	admissionPolicies []string
	// managerFlags and pluginFlags are the flags of the two binaries, read
	// from their help.
	managerFlags, pluginFlags map[string]bool
}

var (
	factsOnce sync.Once
	facts     codeFacts
	factsErr  error
)

// readCodeFacts reads the facts once for the whole test binary.
func readCodeFacts(t *testing.T) codeFacts {
	t.Helper()
	factsOnce.Do(func() { facts, factsErr = loadCodeFacts(t.TempDir()) })
	if factsErr != nil {
		t.Fatal(factsErr)
	}
	return facts
}

func loadCodeFacts(tmp string) (codeFacts, error) {
	root := testenv.RepoRoot()
	f := codeFacts{reasons: map[string]string{}, eventReasons: map[string]bool{}, metrics: map[string]bool{}}
	consts := map[string]string{}
	if err := eachGoFile(filepath.Join(root, "api", "v1alpha1"), func(file *ast.File) {
		for name, value := range stringConsts(file) {
			consts[name] = value
			if strings.HasSuffix(name, "Reason") {
				f.reasons[name] = value
			}
		}
	}); err != nil {
		return f, err
	}
	for _, dir := range []string{"internal", "cmd", "api"} {
		if err := eachGoFile(filepath.Join(root, dir), func(file *ast.File) {
			f.readCalls(file, consts, stringConsts(file))
		}); err != nil {
			return f, err
		}
	}
	for _, obj := range admissionpolicy.AllObjects(admissionpolicy.DefaultOperatorUser) {
		if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			f.admissionPolicies = append(f.admissionPolicies, p.Name)
		}
	}
	var err error
	if f.managerFlags, err = binaryFlags(tmp, "./cmd"); err != nil {
		return f, err
	}
	f.pluginFlags, err = binaryFlags(tmp, "./cmd/kubectl-cleanup")
	return f, err
}

// eachGoFile parses every Go file under dir but tests and calls fn with it.
func eachGoFile(dir string, fn func(*ast.File)) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(file)
		return nil
	})
}

// stringConsts returns the string constants a file declares.
func stringConsts(file *ast.File) map[string]string {
	out := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						out[name.Name] = v
					}
				}
			}
		}
		return true
	})
	return out
}

// readCalls collects the log messages, Event reasons and metric names of a
// file; a message may be a string constant the file declares (local).
func (f *codeFacts) readCalls(file *ast.File, consts, local map[string]string) {
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch {
			case sel.Sel.Name == "Info" && len(n.Args) >= 1:
				if id, ok := n.Args[0].(*ast.Ident); ok && local[id.Name] != "" {
					f.addLog(local[id.Name])
					break
				}
				f.addLog(flatten(n.Args[0], consts))
			case sel.Sel.Name == "Error" && len(n.Args) >= 2:
				f.addLog(flatten(n.Args[1], consts))
			case sel.Sel.Name == "Eventf" && len(n.Args) >= 5:
				if r := flatten(n.Args[3], consts); !strings.Contains(r, wildcard) {
					f.eventReasons[r] = true
				}
			}
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Name" {
				if v := flatten(n.Value, consts); strings.HasPrefix(v, "cleanup_") && !strings.Contains(v, wildcard) {
					f.metrics[v] = true
				}
			}
		}
		return true
	})
}

func (f *codeFacts) addLog(msg string) {
	if strings.Trim(msg, wildcard) != "" {
		f.logMessages = append(f.logMessages, msg)
	}
}

// flatten returns the string an expression builds from literals, constants
// of api/v1alpha1 and +, with wildcard for any other part.
func flatten(e ast.Expr, consts map[string]string) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if v, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
			return v
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return flatten(e.X, consts) + flatten(e.Y, consts)
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "v1alpha1" {
			if v, ok := consts[e.Sel.Name]; ok {
				return v
			}
		}
	case *ast.ParenExpr:
		return flatten(e.X, consts)
	}
	return wildcard
}

var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--?([a-z0-9][a-z0-9-]*)`)

// binaryFlags builds pkg and reads the flags its help lists, and, for a
// command with subcommands (the plugin), the flags of each.
func binaryFlags(tmp, pkg string) (map[string]bool, error) {
	bin := filepath.Join(tmp, filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, &buildError{pkg: pkg, out: string(out), err: err}
	}
	help := func(args ...string) string {
		out, _ := exec.Command(bin, append(args, "--help")...).CombinedOutput() // -h exits non-zero for flag
		return string(out)
	}
	flags := map[string]bool{}
	top := help()
	for _, m := range helpFlag.FindAllStringSubmatch(top, -1) {
		flags[m[1]] = true
	}
	for _, sub := range subcommands(top) {
		for _, m := range helpFlag.FindAllStringSubmatch(help(sub), -1) {
			flags[m[1]] = true
		}
	}
	return flags, nil
}

// subcommands reads the "Available Commands:" section of a cobra help.
func subcommands(help string) []string {
	_, rest, ok := strings.Cut(help, "Available Commands:\n")
	if !ok {
		return nil
	}
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(line, "  ") {
			break
		}
		if !slices.Contains([]string{"help", "completion"}, fields[0]) {
			out = append(out, fields[0])
		}
	}
	return out
}

type buildError struct {
	pkg, out string
	err      error
}

func (e *buildError) Error() string { return "go build " + e.pkg + ": " + e.err.Error() + "\n" + e.out }

var (
	moduleHoldsMu sync.Mutex
	moduleHolds   = map[string]bool{}
)

// goModuleHolds reports whether a Go file of module mod (as go list finds
// it) holds the quoted string literal s: for the log lines of libraries.
func goModuleHolds(mod, s string) bool {
	moduleHoldsMu.Lock()
	defer moduleHoldsMu.Unlock()
	key := mod + "\n" + s
	if found, ok := moduleHolds[key]; ok {
		return found
	}
	found := searchModule(mod, s)
	moduleHolds[key] = found
	return found
}

func searchModule(mod, s string) bool {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		return false
	}
	dir := strings.TrimSpace(string(out))
	found := false
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		raw, err := os.ReadFile(path)
		found = err == nil && strings.Contains(string(raw), strconv.Quote(s))
		return nil
	})
	return found
}
