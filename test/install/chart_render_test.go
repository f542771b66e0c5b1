package install_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The release the chart is compared with config/default as: this name in
// this namespace gives the names kustomize's namePrefix and namespace give.
const (
	releaseName      = "cleanup-operator"
	releaseNamespace = "cleanup-operator-system"
)

// minKubeVersion is the chart's kubeVersion, the oldest Kubernetes it
// renders for.
var minKubeVersion = &chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}

// object is a rendered Kubernetes object as JSON decodes it, so that the
// chart's and kustomize's renders compare field by field.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) meta() map[string]any {
	m, _ := o["metadata"].(map[string]any)
	return m
}
func (o object) name() string      { s, _ := o.meta()["name"].(string); return s }
func (o object) namespace() string { s, _ := o.meta()["namespace"].(string); return s }

// key identifies an object in a render.
type key struct{ Kind, Namespace, Name string }

func (o object) key() key { return key{o.kind(), o.namespace(), o.name()} }

// field returns the value at a path of map keys, nil where it is absent.
func (o object) field(path ...string) any {
	var v any = map[string]any(o)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// render maps each object of a render by its key.
type render map[key]object

// ofKind returns the objects of a kind.
func (r render) ofKind(kind string) []object {
	var out []object
	for k, o := range r {
		if k.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// get returns the object of a kind and name in the release namespace, or
// cluster-scoped when no object of that name is namespaced.
func (r render) get(t *testing.T, kind, name string) object {
	t.Helper()
	if o, ok := r[key{kind, releaseNamespace, name}]; ok {
		return o
	}
	if o, ok := r[key{kind, "", name}]; ok {
		return o
	}
	t.Fatalf("the render has no %s %s; it has %v", kind, name, r.keys())
	return nil
}

func (r render) keys() []key {
	out := make([]key, 0, len(r))
	for k := range r {
		out = append(out, k)
	}
	return out
}

// decodeYAML splits a multi-document YAML stream into objects.
func decodeYAML(raw []byte) ([]object, error) {
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

func index(t *testing.T, objs []object) render {
	t.Helper()
	r := render{}
	for _, o := range objs {
		if _, dup := r[o.key()]; dup {
			t.Fatalf("two objects %v", o.key())
		}
		r[o.key()] = o
	}
	return r
}

// repoRoot is the repository's top folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func chartDir(t *testing.T) string {
	return filepath.Join(repoRoot(t), "charts", "cleanup-operator")
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// renderChart renders the chart as `helm template --include-crds` does,
// with Helm's library, as release cleanup-operator in
// cleanup-operator-system with the values given over the defaults.
func renderChart(t *testing.T, values map[string]any) render {
	t.Helper()
	objs, err := renderChartObjects(loadChart(t), values)
	if err != nil {
		t.Fatalf("rendering the chart with %v: %v", values, err)
	}
	return index(t, objs)
}

func renderChartObjects(ch *chart.Chart, values map[string]any) ([]object, error) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.IncludeCRDs, install.Replace = true, true, true, true
	install.ReleaseName, install.Namespace = releaseName, releaseNamespace
	install.KubeVersion = minKubeVersion
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, err
	}
	return decodeYAML([]byte(rel.Manifest))
}

// renderKustomize builds a kustomization folder with kustomize's library,
// as `kustomize build` does.
func renderKustomize(t *testing.T, fs filesys.FileSystem, dir string) render {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return index(t, resmapObjects(t, m))
}

func resmapObjects(t *testing.T, m resmap.ResMap) []object {
	t.Helper()
	var out []object
	for _, r := range m.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var o object
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// configDefault is `kustomize build config/default`.
func configDefault(t *testing.T) render {
	return renderKustomize(t, filesys.MakeFsOnDisk(), filepath.Join(repoRoot(t), "config", "default"))
}

// readFile reads a file under the repository's top folder.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// parseYAML decodes one YAML document into an object.
func parseYAML(t *testing.T, raw []byte) object {
	t.Helper()
	var o object
	if err := yaml.Unmarshal(bytes.TrimPrefix(raw, []byte("---\n")), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// containerArgs returns the manager container's arguments.
func containerArgs(t *testing.T, deploy object) []string {
	t.Helper()
	containers, _ := deploy.field("spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(containers))
	}
	var out []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// argValue returns the value of a flag, given as --flag=value or as
// --flag value (two arguments, as config/default gives names so that
// kustomize renames them), and whether it is there.
func argValue(args []string, flag string) (string, bool) {
	for _, a := range joinFlagValues(args) {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
		if a == flag {
			return "true", true
		}
	}
	return "", false
}

// joinFlagValues writes each "--flag value" pair of arguments as
// "--flag=value".
func joinFlagValues(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			a += "=" + args[i+1]
			i++
		}
		out = append(out, a)
	}
	return out
}
