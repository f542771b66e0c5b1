package review

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

const policyDoc = "apiVersion: cleanup.fleetops.dev/v1alpha1\nkind: CleanupPolicy\nmetadata: {name: %s}\nspec: {}\n"

// TestRead reads a directory recursively: YAML documents, a JSON List,
// other kinds noted, other files skipped.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), strings.ReplaceAll(policyDoc, "%s", "a")+
		"---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n")
	write(t, filepath.Join(dir, "nested", "more", "b.json"),
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"cleanup.fleetops.dev/v1alpha1","kind":"CleanupPolicy","metadata":{"name":"b"}}]}`)
	write(t, filepath.Join(dir, "README.md"), "not a manifest: kind: CleanupPolicy")
	policies, notes, err := Read([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range policies {
		names = append(names, p.GetName())
	}
	if strings.Join(names, ",") != "a,b" {
		t.Errorf("policies %v, want a,b", names)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "ConfigMap c ignored") {
		t.Errorf("notes %v, want the ConfigMap's", notes)
	}
}

// TestReadRefuses names the file and document of what it cannot take.
func TestReadRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ files map[string]string }{
		"the same policy twice": {map[string]string{"x.yaml": strings.ReplaceAll(policyDoc, "%s", "a"), "y.yaml": strings.ReplaceAll(policyDoc, "%s", "a")}},
		"no kind":               {map[string]string{"x.yaml": "apiVersion: v1\nmetadata: {name: a}\n"}},
		"not YAML":              {map[string]string{"x.yaml": "a: [b\n"}},
		"a policy without name": {map[string]string{"x.yaml": strings.ReplaceAll(policyDoc, "{name: %s}", "{}")}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for f, content := range tc.files {
				write(t, filepath.Join(dir, f), content)
			}
			_, _, err := Read([]string{dir})
			if err == nil || !strings.Contains(err.Error(), "x.yaml") && !strings.Contains(err.Error(), "y.yaml") {
				t.Errorf("error %v, want one naming the file", err)
			}
		})
	}
	if _, _, err := Read([]string{filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing path was read")
	}
}
