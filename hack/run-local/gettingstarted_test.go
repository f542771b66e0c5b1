package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// gettingStarted is the page whose commands testGettingStarted runs.
var gettingStarted = filepath.Join("docs", "getting-started.md")

// skipMarker is the comment before a block that names a command of it
// run-local cannot run, with the reason: "<!-- skip on run-local: PREFIX
// (REASON) -->"; PREFIX begins the command.
var skipMarker = regexp.MustCompile(`^<!-- skip on run-local: (.+) \((.+)\) -->$`)

// docCommand is one command of a ```sh block, as a shell reads it.
type docCommand struct {
	section string
	line    int
	text    string
	// skip is why run-local cannot run it; empty: it runs.
	skip string
	// header is the first line of the ```console block right after the
	// command's block, if any.
	header string
}

// docMarker is a skip marker, and the commands of its block: [from, to).
type docMarker struct {
	line           int
	prefix, reason string
	from, to       int
}

// docReader reads the page line by line.
type docReader struct {
	cmds     []docCommand
	pending  []*docMarker // before the next block
	markers  []*docMarker
	section  string
	fence    string // the info string of the block being read; "" outside
	from     int    // the first command of the last ```sh block
	cont     string // a command continued on the next line
	consoled bool   // the last ```sh block has had its console block
}

// readCommands reads the ```sh blocks of the page and the skip markers
// before them; a marker that begins no command of its block, or more than
// one, is an error.
func readCommands(path string) ([]docCommand, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &docReader{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for n := 1; sc.Scan(); n++ {
		if err := r.read(n, sc.Text()); err != nil {
			return nil, fmt.Errorf("%s:%w", path, err)
		}
	}
	for _, m := range r.markers {
		matched := 0
		for i := m.from; i < m.to; i++ {
			if strings.HasPrefix(r.cmds[i].text, m.prefix) {
				r.cmds[i].skip = m.reason
				matched++
			}
		}
		if matched != 1 {
			return nil, fmt.Errorf("%s:%d: the marker %q begins %d commands of the block after it, not one", path, m.line, m.prefix, matched)
		}
	}
	return r.cmds, sc.Err()
}

// read reads line n.
func (r *docReader) read(n int, line string) error {
	switch {
	case r.fence == "" && strings.HasPrefix(line, "## "):
		r.section = strings.TrimPrefix(line, "## ")
	case r.fence == "" && skipMarker.MatchString(line):
		m := skipMarker.FindStringSubmatch(line)
		r.pending = append(r.pending, &docMarker{line: n, prefix: m[1], reason: m[2]})
	case r.fence == "" && strings.HasPrefix(line, "```"):
		r.fence = strings.TrimPrefix(line, "```")
		if r.fence == "sh" {
			r.from, r.consoled = len(r.cmds), false
		} else if len(r.pending) > 0 {
			return fmt.Errorf("%d: the marker is not right before a ```sh block", r.pending[0].line)
		}
	case r.fence == "" && strings.TrimSpace(line) != "" && len(r.pending) > 0:
		return fmt.Errorf("%d: the marker is not right before a ```sh block", r.pending[0].line)
	case r.fence != "" && line == "```":
		if r.fence == "sh" {
			for _, m := range r.pending {
				m.from, m.to = r.from, len(r.cmds)
			}
			r.markers, r.pending = append(r.markers, r.pending...), nil
		}
		r.fence = ""
	case r.fence == "console" && !r.consoled:
		for i := r.from; i < len(r.cmds); i++ {
			r.cmds[i].header = line
		}
		r.consoled = true
	case r.fence == "sh":
		text := strings.TrimSpace(line)
		if strings.HasSuffix(text, `\`) {
			r.cont += strings.TrimSuffix(text, `\`)
			return nil
		}
		if text = r.cont + text; text != "" && !strings.HasPrefix(text, "#") {
			r.cmds = append(r.cmds, docCommand{section: r.section, line: n, text: text})
		}
		r.cont = ""
	}
	return nil
}

// testGettingStarted runs every command of the ```sh blocks of
// docs/getting-started.md against run-local's hub, in order and as
// written, in the repository's root, with KUBECONFIG set as run-local's
// instructions say, and bin/ and the plugin built from cmd/kubectl-cleanup
// first on PATH: each must exit 0, except those the page marks as needing
// a real hub, which it skips and names. `kubectl get fcpol` prints the
// columns of the console block that follows it.
func testGettingStarted(ctx context.Context, t *testing.T, kubeconfig string) {
	root := testenv.RepoRoot()
	cmds, err := readCommands(filepath.Join(root, gettingStarted))
	if err != nil {
		t.Fatal(err)
	}
	path := buildPlugin(t) + string(os.PathListSeparator) + testenv.BinDir() + string(os.PathListSeparator) + os.Getenv("PATH")
	var skipped []string
	columnsChecked := false
	for _, c := range cmds {
		if c.skip != "" {
			skipped = append(skipped, fmt.Sprintf("%s (%s)", c.text, c.skip))
			continue
		}
		out := runDocCommand(ctx, t, root, kubeconfig, path, c)
		if c.text == "kubectl get fcpol" {
			checkColumns(t, c, out)
			columnsChecked = true
		}
	}
	if !columnsChecked {
		t.Errorf("%s has no `kubectl get fcpol` followed by a console block", gettingStarted)
	}
	t.Logf("skipped %d command(s) that need a real hub:\n  %s", len(skipped), strings.Join(skipped, "\n  "))
	if len(skipped) == 0 || len(skipped) == len(cmds) {
		t.Errorf("%d of the %d commands of %s skipped: the markers are not read", len(skipped), len(cmds), gettingStarted)
	}
}

// runDocCommand runs one command in sh, as a reader's terminal would, and
// returns its standard output; it fails the test unless it exits 0.
func runDocCommand(ctx context.Context, t *testing.T, root, kubeconfig, path string, c docCommand) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", c.text)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("§ %s: %s (%s:%d): %v\n%s%s", c.section, c.text, gettingStarted, c.line, err, out, stderr.String())
	}
	t.Logf("%s (%s:%d)", c.text, gettingStarted, c.line)
	return string(out)
}

// checkColumns compares the header kubectl printed with the console block
// of the page.
func checkColumns(t *testing.T, c docCommand, out string) {
	t.Helper()
	if c.header == "" {
		t.Errorf("%s:%d: no console block after %q", gettingStarted, c.line, c.text)
		return
	}
	got, want := strings.Fields(strings.SplitN(out, "\n", 2)[0]), strings.Fields(c.header)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s prints the columns %v, the page shows %v:\n%s", c.text, got, want, out)
	}
}

// buildPlugin builds the plugin as make plugin does, into a directory of
// the test's, and returns the directory.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := testenv.Build(dir, "kubectl-cleanup", "./cmd/kubectl-cleanup", ""); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReadCommands: a block's commands, continued lines joined, comments
// left out, each with the console block after it; a marker skips the one
// command it begins, and one that begins none or two, or stands apart from
// a block, is an error. The page skips only what needs a real hub.
func TestReadCommands(t *testing.T) {
	read := func(page string) ([]docCommand, error) {
		path := filepath.Join(t.TempDir(), "page.md")
		if err := os.WriteFile(path, []byte(page), 0o600); err != nil {
			t.Fatal(err)
		}
		return readCommands(path)
	}
	cmds, err := read("## 1. One\n\n<!-- skip on run-local: hub (why) -->\n```sh\n# a comment\nrun a  # says\n\nhub --x \\\n  --y\n```\n\n" +
		"```console\nA   B\n1   2\n```\n\n```sh\nrun b\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []docCommand{
		{section: "1. One", line: 6, text: "run a  # says", header: "A   B"},
		{section: "1. One", line: 9, text: "hub --x --y", skip: "why", header: "A   B"},
		{section: "1. One", line: 18, text: "run b"},
	}
	if fmt.Sprint(cmds) != fmt.Sprint(want) {
		t.Errorf("read\n%v\nwant\n%v", cmds, want)
	}
	for page, wantErr := range map[string]string{
		"<!-- skip on run-local: gone (why) -->\n```sh\nrun a\n```\n":        "begins 0 commands",
		"<!-- skip on run-local: run (why) -->\n```sh\nrun a\nrun b\n```\n":  "begins 2 commands",
		"<!-- skip on run-local: run (why) -->\nProse.\n```sh\nrun a\n```\n": "not right before",
		"<!-- skip on run-local: run (why) -->\n```console\nrun a\n```\n":    "not right before",
	} {
		if _, err := read(page); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want one that says %q", page, err, wantErr)
		}
	}

	cmds, err = readCommands(filepath.Join(testenv.RepoRoot(), gettingStarted))
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, c := range cmds {
		if c.skip != "" {
			skipped = append(skipped, c.text)
		}
	}
	// The ClusterManager check, the two installs, the rollout, make plugin.
	hubOnly := []string{"kubectl get clustermanager ", "helm install ", "kubectl apply --server-side -k config/default",
		"kubectl -n cleanup-operator-system rollout status ", "make plugin "}
	ok := len(skipped) == len(hubOnly)
	for i := 0; ok && i < len(hubOnly); i++ {
		ok = strings.HasPrefix(skipped[i], hubOnly[i])
	}
	if !ok {
		t.Errorf("%s skips on run-local:\n  %s\nwant only what needs a real hub: %q", gettingStarted, strings.Join(skipped, "\n  "), hubOnly)
	}
}
