package install_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestChartMatchesConfigDefault renders the chart with its defaults as
// release cleanup-operator in cleanup-operator-system and compares it with
// `kustomize build config/default`: the same objects under the same names,
// and the same content but for the labels Helm adds and the order of the
// manager's flags.
//
// config/default's Namespace is not in the chart: Helm installs into a
// namespace it is given (helm install --namespace ... --create-namespace).
func TestChartMatchesConfigDefault(t *testing.T) {
	want, got := configDefault(t), renderChart(t, nil)
	delete(want, key{"Namespace", "", releaseNamespace})
	compareRenders(t, want, got)
}

func filterArgs(args any, flags ...string) []any {
	var out []any
	for _, a := range joinFlagValues(toStrings(args)) {
		if name, _, _ := strings.Cut(a, "="); !slices.Contains(flags, name) {
			out = append(out, a)
		}
	}
	return out
}

func toStrings(v any) []string {
	var out []string
	for _, s := range list(v) {
		out = append(out, s.(string))
	}
	return out
}

// TestChartMonitoringMatchesConfig compares the chart's ServiceMonitor,
// PrometheusRule and dashboard ConfigMap with config/prometheus, built with
// config/default's namespace and name prefix, and config/grafana.
func TestChartMonitoringMatchesConfig(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	for _, dir := range []string{"prometheus", "grafana"} {
		files, err := filepath.Glob(filepath.Join(repoRoot(t), "config", dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if raw, err := os.ReadFile(f); err == nil { // folders (tests/) fail and are not needed
				must(t, fs.WriteFile(filepath.Join("/config", dir, filepath.Base(f)), raw))
			}
		}
	}
	must(t, fs.WriteFile("/overlay/kustomization.yaml", []byte(
		"namespace: "+releaseNamespace+"\nnamePrefix: cleanup-operator-\nresources:\n- ../config/prometheus\n")))
	want := renderKustomize(t, fs, "/overlay")
	maps.Copy(want, renderKustomize(t, fs, "/config/grafana"))
	got := render{}
	for k, o := range renderChart(t, monitoringValues) {
		if _, ok := want[k]; ok || slices.Contains([]string{"ServiceMonitor", "PrometheusRule", "ConfigMap"}, k.Kind) {
			got[k] = o
		}
	}
	compareRenders(t, want, got)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// compareRenders fails for each object only one render has, and for each
// object whose content differs. The chart may add labels (Helm's own); the
// manager's flags compare in any order.
func compareRenders(t *testing.T, want, got render) {
	t.Helper()
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("the chart renders no %s %s/%s", k.Kind, k.Namespace, k.Name)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s %s/%s, which kustomize does not", k.Kind, k.Namespace, k.Name)
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			continue
		}
		w, g = normalize(t, k, w, g), normalize(t, k, g, nil)
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s %s/%s differs (-kustomize +chart):\n%s", k.Kind, k.Namespace, k.Name, diff)
		}
	}
}

// normalize returns a copy of o without what may differ: its labels and
// those of its pod template, once checked to be among the other's (when
// other is given); the order of the manager's flags, and whether a flag's
// value is an argument of its own; the image pull policy
// (the API server's default for a tagged image is the chart's).
func normalize(t *testing.T, k key, o, other object) object {
	t.Helper()
	c := deepCopy(t, o)
	meta := c.meta()
	if other != nil {
		checkLabels(t, k, "", meta["labels"], other.meta()["labels"])
	}
	delete(meta, "labels")
	for m := range maps.Keys(meta) {
		if m != "name" && m != "namespace" && m != "annotations" {
			delete(meta, m)
		}
	}
	if k.Kind != "Deployment" {
		return c
	}
	tmpl := c.field("spec", "template", "metadata").(map[string]any)
	if other != nil {
		checkLabels(t, k, "pod template ", tmpl["labels"], other.field("spec", "template", "metadata", "labels"))
	}
	delete(tmpl, "labels")
	for _, ctr := range c.field("spec", "template", "spec", "containers").([]any) {
		ctr := ctr.(map[string]any)
		delete(ctr, "imagePullPolicy")
		args := joinFlagValues(toStrings(ctr["args"]))
		slices.Sort(args)
		ctr["args"] = args
	}
	return c
}

// checkLabels fails for each of want's labels got lacks or sets otherwise.
func checkLabels(t *testing.T, k key, what string, want, got any) {
	t.Helper()
	w, _ := want.(map[string]any)
	g, _ := got.(map[string]any)
	for name, v := range w {
		if g[name] != v {
			t.Errorf("%s %s: %slabel %s is %v in the chart, %v in kustomize's", k.Kind, k.Name, what, name, g[name], v)
		}
	}
}

func deepCopy(t *testing.T, o object) object {
	t.Helper()
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var c object
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChartCertManagerMatchesConfig compares the chart with
// certificates.source cert-manager and config/default with the component
// config/components/certmanager, as its kustomization says to use it.
func TestChartCertManagerMatchesConfig(t *testing.T) {
	component := filepath.Join(repoRoot(t), "config", "components", "certmanager")
	if _, err := os.Stat(component); err != nil {
		t.Skipf("no kustomize component %s yet: %v", component, err)
	}
	dir := t.TempDir()
	must(t, os.CopyFS(filepath.Join(dir, "config"), os.DirFS(filepath.Join(repoRoot(t), "config"))))
	must(t, os.MkdirAll(filepath.Join(dir, "overlay"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "overlay", "kustomization.yaml"), []byte(
		"resources:\n- ../config/default\ncomponents:\n- ../config/components/certmanager\n"), 0o644))
	want := renderKustomize(t, filesys.MakeFsOnDisk(), filepath.Join(dir, "overlay"))
	delete(want, key{"Namespace", "", releaseNamespace})
	compareRenders(t, want, renderChart(t, valueSets["cert-manager"]))
}
