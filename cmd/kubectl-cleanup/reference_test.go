package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/homedir"
)

var update = flag.Bool("update", false, "rewrite docs/reference/cli from the plugin's help")

const referenceDir = "../../docs/reference/cli"

// referencePages renders one page per command from the help the plugin
// prints for it (kubectl cleanup CMD --help), and the index.
func referencePages(t *testing.T) map[string]string {
	t.Helper()
	root := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	pages := map[string]string{}
	var index strings.Builder
	index.WriteString("# kubectl cleanup: command reference\n\n" +
		"Generated from the plugin's own help by `make docs-cli`; a test fails when they differ.\n\n")
	for _, cmd := range append([]*cobra.Command{root}, root.Commands()...) {
		if !cmd.IsAvailableCommand() && cmd != root {
			continue
		}
		path := cmd.CommandPath()
		file := strings.ReplaceAll(path, " ", "_") + ".md"
		var help bytes.Buffer
		cmd.SetOut(&help)
		if err := cmd.Help(); err != nil {
			t.Fatal(err)
		}
		// The default of --cache-dir is the home folder of whoever runs this.
		text := strings.ReplaceAll(help.String(), homedir.HomeDir(), "$HOME")
		pages[file] = fmt.Sprintf("# %s\n\n%s.\n\n```\n%s```\n", path, cmd.Short, text)
		fmt.Fprintf(&index, "- [%s](%s): %s\n", path, file, cmd.Short)
	}
	pages["README.md"] = index.String()
	return pages
}

// TestCLIReference fails when docs/reference/cli differs from the
// plugin's help; go test -run TestCLIReference -update rewrites it.
func TestCLIReference(t *testing.T) {
	pages := referencePages(t)
	if *update {
		if err := os.MkdirAll(referenceDir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(referenceDir, "*.md"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for name, text := range pages {
			if err := os.WriteFile(filepath.Join(referenceDir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(referenceDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := pages[filepath.Base(f)]; !ok {
			t.Errorf("%s documents no command of the plugin: run make docs-cli", f)
		}
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(referenceDir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s/%s differs from the plugin's help: run make docs-cli", referenceDir, name)
		}
	}
}
