package gitops

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// argocdDir holds the Argo CD resource customizations, in the layout of
// Argo CD's resource_customizations: <group>/<Kind>/health.lua with its
// health_test.yaml and testdata/.
func argocdDir() string { return filepath.Join(testenv.RepoRoot(), "config", "argocd") }

// policyHealthScript is the CleanupPolicy health check.
func policyHealthScript(t interface {
	Helper()
	Fatal(...any)
}) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(argocdDir(), v1alpha1.GroupVersion.Group, "CleanupPolicy", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// healthTests is a health_test.yaml as Argo CD reads it.
type healthTests struct {
	Tests []struct {
		HealthStatus health `json:"healthStatus"`
		InputPath    string `json:"inputPath"`
	} `json:"tests"`
}

// healthCase is one case of one health_test.yaml.
type healthCase struct {
	dir    string // <group>/<Kind>
	input  string // relative to dir
	want   health
	object map[string]any
}

// loadHealthChecks finds every health.lua under config/argocd and reads its
// cases; it fails on a script without cases, cases without a script, and
// testdata no case reads.
func loadHealthChecks(t *testing.T) map[string][]healthCase {
	t.Helper()
	checks := map[string][]healthCase{}
	var scripts, testFiles []string
	err := filepath.WalkDir(argocdDir(), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch d.Name() {
		case "health.lua":
			scripts = append(scripts, filepath.Dir(path))
		case "health_test.yaml":
			testFiles = append(testFiles, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(scripts, testFiles) {
		t.Fatalf("every health.lua needs a health_test.yaml beside it and the reverse: scripts in %v, tests in %v", scripts, testFiles)
	}
	if len(scripts) == 0 {
		t.Fatalf("no health.lua under %s", argocdDir())
	}
	for _, dir := range scripts {
		rel, _ := filepath.Rel(argocdDir(), dir)
		if parts := strings.Split(filepath.ToSlash(rel), "/"); len(parts) != 2 || !strings.Contains(parts[0], ".") {
			t.Fatalf("%s: a health check lives in <group>/<Kind>/", rel)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var tests healthTests
		if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
			t.Fatalf("%s/health_test.yaml: %v", rel, err)
		}
		read := map[string]bool{}
		for i, tc := range tests.Tests {
			if tc.InputPath == "" || tc.HealthStatus.Status == "" {
				t.Fatalf("%s/health_test.yaml: test %d needs inputPath and healthStatus.status", rel, i)
			}
			obj, err := readObject(filepath.Join(dir, tc.InputPath))
			if err != nil {
				t.Fatal(err)
			}
			read[filepath.Clean(tc.InputPath)] = true
			checks[rel] = append(checks[rel], healthCase{dir: rel, input: tc.InputPath, want: tc.HealthStatus, object: obj})
		}
		files, err := filepath.Glob(filepath.Join(dir, "testdata", "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if r, _ := filepath.Rel(dir, f); !read[r] {
				t.Errorf("%s: %s is read by no test", rel, r)
			}
		}
	}
	return checks
}

// TestHealthChecks runs every health.lua under config/argocd on each of its
// health_test.yaml cases and compares status and message exactly.
func TestHealthChecks(t *testing.T) {
	valid := []string{"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}
	for dir, cases := range loadHealthChecks(t) {
		script, err := os.ReadFile(filepath.Join(argocdDir(), dir, "health.lua"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			t.Run(dir+"/"+tc.input, func(t *testing.T) {
				if !slices.Contains(valid, tc.want.Status) {
					t.Fatalf("%q is not an Argo CD health status", tc.want.Status)
				}
				got, err := runHealth(string(script), tc.object)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("got  %s: %q\nwant %s: %q", got.Status, got.Message, tc.want.Status, tc.want.Message)
				}
			})
		}
	}
}

// TestPolicyHealthCasesCoverEveryState makes sure the CleanupPolicy cases
// keep covering each health the script can return.
func TestPolicyHealthCasesCoverEveryState(t *testing.T) {
	seen := map[string]int{}
	for _, tc := range loadHealthChecks(t)[filepath.Join(v1alpha1.GroupVersion.Group, "CleanupPolicy")] {
		seen[tc.want.Status]++
	}
	for _, s := range []string{"Healthy", "Progressing", "Degraded", "Suspended"} {
		if seen[s] < 2 {
			t.Errorf("%d case(s) of %s, want at least 2", seen[s], s)
		}
	}
}

// TestPolicyHealthCasesCatchMistakes runs the cases on broken copies of the
// CleanupPolicy script: each mistake must fail at least one case, or the
// cases do not test what they claim to.
func TestPolicyHealthCasesCatchMistakes(t *testing.T) {
	script := policyHealthScript(t)
	cases := loadHealthChecks(t)[filepath.Join(v1alpha1.GroupVersion.Group, "CleanupPolicy")]
	mutants := []struct{ name, from, to string }{
		{"Stalled ignored", `local stalled = conditions["Stalled"]`, `local stalled = nil`},
		{"Reconciling ignored", `local reconciling = conditions["Reconciling"]`, `local reconciling = nil`},
		{"observedGeneration ignored", `if generation ~= nil and observed ~= generation then`, `if false then`},
		{"Ready=False taken as healthy", `if ready.status ~= "True" then`, `if ready.status == "Unknown" then`},
		{"the Ready condition's generation ignored", `ready.observedGeneration ~= generation then`, `false then`},
		{"no status taken as healthy", "if status == nil then\n  hs.status = \"Progressing\"", "if status == nil then\n  hs.status = \"Healthy\""},
		{"dry run not said", `if spec.dryRun == true then`, `if false then`},
		{"suspend ignored", `if spec.suspend == true then`, `if false then`},
		{"conflicts not said", `if count(status.conflicts) > 0 then`, `if false then`},
		{"the string library used", `"Waiting for the Ready condition of generation " .. generation`, `string.format("Waiting for the Ready condition of generation %d", generation)`},
		{"Degraded for Reconciling", "hs.status = \"Progressing\"\n  hs.message = describe(reconciling)", "hs.status = \"Degraded\"\n  hs.message = describe(reconciling)"},
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			if strings.Count(script, m.from) != 1 {
				t.Fatalf("health.lua no longer holds %q once: update this mutant", m.from)
			}
			mutant := strings.Replace(script, m.from, m.to, 1)
			for _, tc := range cases {
				got, err := runHealth(mutant, tc.object)
				if err != nil || got != tc.want {
					return // caught
				}
			}
			t.Errorf("no case fails when %s", m.name)
		})
	}
}

// TestArgoCDConfigMap checks that argocd-cm.yaml carries every health.lua
// under config/argocd byte for byte, under the key Argo CD reads.
func TestArgoCDConfigMap(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(argocdDir(), "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Metadata.Name != "argocd-cm" {
		t.Fatalf("not the argocd-cm ConfigMap: %s %s %s", cm.APIVersion, cm.Kind, cm.Metadata.Name)
	}
	const prefix = "resource.customizations.health."
	found := 0
	for dir := range loadHealthChecks(t) {
		group, kind := filepath.Split(dir)
		key := prefix + filepath.Clean(group) + "_" + kind
		script, err := os.ReadFile(filepath.Join(argocdDir(), dir, "health.lua"))
		if err != nil {
			t.Fatal(err)
		}
		inCM, ok := cm.Data[key]
		if !ok {
			t.Errorf("argocd-cm.yaml has no %s", key)
			continue
		}
		found++
		if !bytes.Equal([]byte(inCM), script) {
			t.Errorf("argocd-cm.yaml %s differs from %s/health.lua: copy the script again (indented by four spaces)", key, dir)
		}
	}
	for key := range cm.Data {
		if strings.HasPrefix(key, prefix) {
			found--
		}
	}
	if found != 0 {
		t.Errorf("argocd-cm.yaml has health checks with no health.lua under config/argocd")
	}
}

// application is the part of an Argo CD Application the example uses. It is
// decoded strictly: a misspelt field fails.
type application struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Project string `json:"project"`
		Source  struct {
			RepoURL        string `json:"repoURL"`
			TargetRevision string `json:"targetRevision"`
			Path           string `json:"path"`
		} `json:"source"`
		Destination struct {
			Server    string `json:"server"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"destination"`
		SyncPolicy struct {
			Automated *struct {
				Prune    bool `json:"prune"`
				SelfHeal bool `json:"selfHeal"`
			} `json:"automated"`
			SyncOptions []string `json:"syncOptions"`
			Retry       *struct {
				Limit   int `json:"limit"`
				Backoff struct {
					Duration    string `json:"duration"`
					Factor      int    `json:"factor"`
					MaxDuration string `json:"maxDuration"`
				} `json:"backoff"`
			} `json:"retry"`
		} `json:"syncPolicy"`
		IgnoreDifferences []ignoreDifference `json:"ignoreDifferences"`
	} `json:"spec"`
}

type ignoreDifference struct {
	Group                 string   `json:"group"`
	Kind                  string   `json:"kind"`
	Name                  string   `json:"name"`
	Namespace             string   `json:"namespace"`
	JSONPointers          []string `json:"jsonPointers"`
	JQPathExpressions     []string `json:"jqPathExpressions"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers"`
}

func readApplication(t *testing.T) application {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(argocdDir(), "application.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var app application
	if err := yaml.UnmarshalStrict(raw, &app); err != nil {
		t.Fatalf("application.yaml: %v", err)
	}
	return app
}

// TestApplication checks the example Application's shape: server-side
// apply, ignored differences respected on sync, and the fields the operator
// writes ignored on every kind it writes them on, with the names the
// operator uses.
func TestApplication(t *testing.T) {
	app := readApplication(t)
	if app.APIVersion != "argoproj.io/v1alpha1" || app.Kind != "Application" {
		t.Fatalf("not an Argo CD Application: %s %s", app.APIVersion, app.Kind)
	}
	if app.Metadata.Name == "" || app.Spec.Project == "" || app.Spec.Source.RepoURL == "" || app.Spec.Source.Path == "" {
		t.Errorf("name, project, source.repoURL and source.path are required")
	}
	if app.Spec.Destination.Server == "" && app.Spec.Destination.Name == "" {
		t.Errorf("destination needs a server or a name")
	}
	if wave, ok := app.Metadata.Annotations["argocd.argoproj.io/sync-wave"]; !ok {
		t.Errorf("no sync wave: the policies must come after the operator")
	} else if _, err := strconv.Atoi(wave); err != nil {
		t.Errorf("sync wave %q is not an integer", wave)
	}
	for _, opt := range []string{"ServerSideApply=true", "RespectIgnoreDifferences=true"} {
		if !slices.Contains(app.Spec.SyncPolicy.SyncOptions, opt) {
			t.Errorf("syncOptions lack %s", opt)
		}
	}

	byKind := map[string]ignoreDifference{}
	for _, d := range app.Spec.IgnoreDifferences {
		if d.Kind == "" {
			t.Errorf("an ignoreDifferences entry without kind")
		}
		if len(d.JSONPointers)+len(d.JQPathExpressions)+len(d.ManagedFieldsManagers) == 0 {
			t.Errorf("%s/%s ignores nothing", d.Group, d.Kind)
		}
		for _, p := range d.JSONPointers {
			if err := validJSONPointer(p); err != nil {
				t.Errorf("%s/%s: %v", d.Group, d.Kind, err)
			}
		}
		if _, dup := byKind[d.Group+"/"+d.Kind]; dup {
			t.Errorf("%s/%s listed twice", d.Group, d.Kind)
		}
		byKind[d.Group+"/"+d.Kind] = d
	}
	// What the operator stamps with server-side apply is named by its field manager.
	for _, gk := range []string{
		v1alpha1.GroupVersion.Group + "/CleanupPolicy",
		"work.open-cluster-management.io/ManifestWork",
		"policy.open-cluster-management.io/ConfigurationPolicy",
	} {
		d, ok := byKind[gk]
		if !ok {
			t.Errorf("ignoreDifferences lacks %s", gk)
			continue
		}
		if !slices.Contains(d.ManagedFieldsManagers, v1alpha1.FieldManager) {
			t.Errorf("%s: managedFieldsManagers lacks %s", gk, v1alpha1.FieldManager)
		}
	}
	// What it writes on ManagedClusters is named by path.
	mc, ok := byKind["cluster.open-cluster-management.io/ManagedCluster"]
	if !ok {
		t.Fatalf("ignoreDifferences lacks ManagedCluster")
	}
	for _, annotation := range []string{v1alpha1.GoverningPolicyAnnotation, v1alpha1.ForcedObjectsAnnotation} {
		if p := "/metadata/annotations/" + escapeJSONPointer(annotation); !slices.Contains(mc.JSONPointers, p) {
			t.Errorf("ManagedCluster: jsonPointers lack %s", p)
		}
	}
	if !slices.ContainsFunc(mc.JQPathExpressions, func(e string) bool {
		return strings.Contains(e, ".metadata.finalizers") && strings.Contains(e, `"`+v1alpha1.ClusterCleanupFinalizer+`"`)
	}) {
		t.Errorf("ManagedCluster: no jqPathExpression for the finalizer %s", v1alpha1.ClusterCleanupFinalizer)
	}

	// Every kind named is one that exists.
	crds, err := testenv.LoadCRDs()
	if err != nil {
		t.Skipf("the kinds are not checked: %v", err)
	}
	kinds := map[string]bool{v1alpha1.GroupVersion.Group + "/CleanupPolicy": true}
	for _, crd := range crds {
		kinds[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = true
	}
	for gk := range byKind {
		if !kinds[gk] {
			t.Errorf("ignoreDifferences names %s, which no CRD defines", gk)
		}
	}
}

// TestArgoCDStaysOutOfTheInstall checks that no kustomization under config/
// other than config/argocd's own reaches config/argocd: the operator's
// install must not carry Argo CD objects.
func TestArgoCDStaysOutOfTheInstall(t *testing.T) {
	err := filepath.WalkDir(filepath.Join(testenv.RepoRoot(), "config"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == argocdDir() {
			return filepath.SkipDir
		}
		if d.Name() != "kustomization.yaml" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte("argocd")) {
			t.Errorf("%s refers to config/argocd", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func escapeJSONPointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func validJSONPointer(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", p)
		}
	}
	return nil
}
