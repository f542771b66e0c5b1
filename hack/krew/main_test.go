package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// plugin is the part of krew's Plugin (krew.googlecontainertools.github.com/v1alpha2)
// the manifest uses; unknown fields fail the strict parse.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats"`
		Platforms        []platform `json:"platforms"`
	} `json:"spec"`
}

type platform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Files  []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
	Bin string `json:"bin"`
}

const manifestFile = "../../plugins/krew/cleanup.yaml"

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// makefileVersion is the VERSION the Makefile releases.
func makefileVersion(t *testing.T) string {
	raw, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("the Makefile sets no VERSION ?=")
	}
	return "v" + string(m[1])
}

// check fails t where p is not a manifest krew installs: the fields krew
// requires, its name rules, the platforms and archives the release builds.
func check(t *testing.T, p *plugin, version string) {
	t.Helper()
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion %q, kind %q: not krew's Plugin", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != "cleanup" || p.Metadata.Name != strings.TrimSuffix(filepath.Base(manifestFile), ".yaml") {
		t.Errorf("metadata.name %q: krew wants cleanup, the file's name", p.Metadata.Name)
	}
	if p.Spec.Version != version {
		t.Errorf("spec.version %q is not the Makefile's VERSION (%s)", p.Spec.Version, version)
	}
	if p.Spec.ShortDescription == "" || p.Spec.Homepage == "" || p.Spec.Description == "" {
		t.Error("spec.shortDescription, spec.homepage and spec.description are required")
	}
	want := map[string]bool{"linux/amd64": true, "linux/arm64": true, "darwin/amd64": true, "darwin/arm64": true}
	for i, pl := range p.Spec.Platforms {
		where := fmt.Sprintf("spec.platforms[%d]", i)
		osArch := pl.Selector.MatchLabels["os"] + "/" + pl.Selector.MatchLabels["arch"]
		if !want[osArch] {
			t.Errorf("%s: os/arch %s is not one the release builds, or comes twice", where, osArch)
		}
		delete(want, osArch)
		archive := "kubectl-cleanup_" + version + "_" + strings.ReplaceAll(osArch, "/", "_") + ".tar.gz"
		if pl.URI != "https://github.com/fleetops-dev/cleanup-operator/releases/download/"+version+"/"+archive {
			t.Errorf("%s.uri %q: not the release's %s", where, pl.URI, archive)
		}
		if !sha256Hex.MatchString(pl.SHA256) {
			t.Errorf("%s.sha256 %q: not 64 hexadecimal digits", where, pl.SHA256)
		}
		if pl.Bin != "kubectl-cleanup" {
			t.Errorf("%s.bin %q: not kubectl-cleanup", where, pl.Bin)
		}
		from := map[string]bool{}
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" {
				t.Errorf("%s.files: from and to are required", where)
			}
			from[f.From] = true
		}
		for _, f := range []string{"kubectl-cleanup", "kubectl_complete-cleanup", "LICENSE"} {
			if !from[f] {
				t.Errorf("%s.files does not copy %s", where, f)
			}
		}
	}
	for osArch := range want {
		t.Errorf("spec.platforms has no %s", osArch)
	}
}

func parse(t *testing.T, raw []byte) *plugin {
	t.Helper()
	p := &plugin{}
	if err := yaml.UnmarshalStrict(raw, p); err != nil {
		t.Fatalf("the manifest does not parse as krew's Plugin: %v", err)
	}
	return p
}

// TestManifest: plugins/krew/cleanup.yaml is a krew Plugin of the
// Makefile's version; its sha256s are the zeros the release fills.
func TestManifest(t *testing.T) {
	raw, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, raw)
	check(t, p, makefileVersion(t))
	for i, pl := range p.Spec.Platforms {
		if pl.SHA256 != strings.Repeat("0", 64) {
			t.Errorf("spec.platforms[%d].sha256 is not the placeholder: the release fills it, not the template", i)
		}
	}
	if _, err := os.Stat("../../cmd/kubectl-cleanup/kubectl_complete-cleanup"); err != nil {
		t.Errorf("the completion shim the archives carry: %v", err)
	}
}

// TestFill: the release step writes each archive's own sha256 after its
// uri, and the result is still a valid manifest.
func TestFill(t *testing.T) {
	dist := t.TempDir()
	raw, err := os.ReadFile(manifestFile)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, pl := range parse(t, raw).Spec.Platforms {
		name := path.Base(pl.URI)
		content := []byte("archive " + name)
		if err := os.WriteFile(filepath.Join(dist, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(content)
		sums[pl.URI] = hex.EncodeToString(sum[:])
	}
	out := filepath.Join(dist, "krew", "cleanup.yaml")
	if err := write(manifestFile, dist, out); err != nil {
		t.Fatal(err)
	}
	filled, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, filled)
	check(t, p, makefileVersion(t))
	for _, pl := range p.Spec.Platforms {
		if pl.SHA256 != sums[pl.URI] {
			t.Errorf("%s: sha256 %s, the archive's is %s", pl.URI, pl.SHA256, sums[pl.URI])
		}
	}

	// An archive missing from dist fails the release.
	if err := os.Remove(filepath.Join(dist, path.Base(p.Spec.Platforms[0].URI))); err != nil {
		t.Fatal(err)
	}
	if err := write(manifestFile, dist, out); err == nil {
		t.Error("a missing archive did not fail")
	}
}
