package repo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// machinePath matches the start of a directory that exists on one machine
// only: a home folder, a workspace or mount folder, a macOS temporary
// folder, a Windows profile. Paths inside a container the project builds or
// runs (/tmp/k8s-webhook-server/..., /var/run/secrets/...) are not matched.
var machinePath = regexp.MustCompile(`(^|[^A-Za-z0-9_.~-])(/(home|Users|root|work|workspace|mnt|media)/[A-Za-z0-9_.+-]|/private/var/folder[s]/|[A-Za-z]:\\+Users\\)`)

// inContainer lists the files where a match names a folder of an image the
// project builds, not of a machine.
var inContainer = map[string]*regexp.Regexp{
	"Dockerfile": regexp.MustCompile(`/workspace/`),
}

// trackedFiles lists the repository's tracked files, relative to its root.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (the check reads the tracked files of a git checkout)", root, err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files
}

// TestNoMachinePaths fails on any tracked file that names a directory of
// one build machine.
func TestNoMachinePaths(t *testing.T) {
	root := testenv.RepoRoot()
	for _, f := range trackedFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet committed
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary
		}
		for i, line := range strings.Split(string(data), "\n") {
			m := machinePath.FindString(line)
			if m == "" {
				continue
			}
			if allowed := inContainer[filepath.Base(f)]; allowed != nil && allowed.MatchString(line) {
				continue
			}
			t.Errorf("%s:%d names a directory of one machine (%q): %s", f, i+1, strings.TrimSpace(m), strings.TrimSpace(line))
		}
	}
}

// TestMachinePathPattern keeps the pattern honest: it matches what it is
// for and leaves paths inside containers alone.
func TestMachinePathPattern(t *testing.T) {
	for _, s := range []string{
		// Split so that this file does not name them itself.
		"OCM_SOURCE ?= /" + "work/.mirror/ocm/repo",
		"replace x => /" + "home/dev/src/x",
		"cd /" + "Users/dev/go",
		"GOPATH=/" + "root/go",
		`C:\` + `Users\dev\src`,
		"TMPDIR=/" + "private/var/folders/x1/T",
	} {
		if !machinePath.MatchString(s) {
			t.Errorf("not matched: %q", s)
		}
	}
	for _, s := range []string{
		"certDir: /tmp/k8s-webhook-server/serving-certs",
		"/var/run/secrets/kubernetes.io/serviceaccount/token",
		"https://example.com/home/page",
		"docs/work/notes.md",
		"$(LOCALBIN)/work",
		"~/work/x",
	} {
		if machinePath.MatchString(s) {
			t.Errorf("matched: %q", s)
		}
	}
}

// TestReplacesStayInRepository fails on a go.mod, module file or go.work
// that replaces a module with a directory that is not a module of this
// repository's own tracked code.
func TestReplacesStayInRepository(t *testing.T) {
	root := testenv.RepoRoot()
	files := trackedFiles(t, root)
	modules := map[string]bool{} // directories of tracked go.mod files
	for _, f := range files {
		if filepath.Base(f) == "go.mod" {
			modules[filepath.Dir(f)] = true
		}
	}
	checked := 0
	for _, f := range files {
		base := filepath.Base(f)
		if !strings.HasSuffix(base, ".mod") && base != "go.work" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		var replaces []*modfile.Replace
		if base == "go.work" {
			w, err := modfile.ParseWork(f, data, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			replaces = w.Replace
		} else {
			m, err := modfile.Parse(f, data, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			replaces = m.Replace
		}
		checked++
		for _, r := range replaces {
			if r.New.Version != "" {
				continue // a module version, served by the proxy
			}
			if msg := localReplaceProblem(filepath.Dir(f), r.New.Path, modules); msg != "" {
				t.Errorf("%s:%d replaces %s with %s: %s", f, r.Syntax.Start.Line, r.Old.Path, r.New.Path, msg)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no module file found among the tracked files")
	}
}

// localReplaceProblem says why a directory replacement, written in a module
// file of dir, is not this repository's own code, or returns "".
func localReplaceProblem(dir, target string, modules map[string]bool) string {
	if filepath.IsAbs(target) {
		return "an absolute directory, outside the repository"
	}
	rel := filepath.Clean(filepath.Join(dir, target))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "a directory outside the repository"
	}
	if !modules[rel] {
		return "a directory that holds no tracked go.mod (built or copied, not the repository's code)"
	}
	return ""
}

func TestLocalReplaceProblem(t *testing.T) {
	modules := map[string]bool{".": true, "test/e2e": true}
	for _, c := range []struct {
		dir, target string
		ok          bool
	}{
		{"test/install", "../..", true},
		{"test/e2e", "../../bin/ocm-v1.3.1", false},
		{"test/e2e", "../../../ocm", false},
		{"test/e2e", "/src/ocm", false},
		{".", "./test/e2e", true},
	} {
		if got := localReplaceProblem(c.dir, c.target, modules); (got == "") != c.ok {
			t.Errorf("%s => %s: %q", c.dir, c.target, got)
		}
	}
}
