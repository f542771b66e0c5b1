// Package install_test installs the operator as a platform team does, by
// each install path, and proves the install works: every reference of the
// rendered objects resolves, and, applied to a real kube-apiserver, the
// manager binary started with the installed Deployment's own args and env,
// as the installed ServiceAccount, governs a small fleet and its webhook
// admits and refuses through the API server.
//
// A path is a function rendering the objects it installs; a path that
// installs is applied (or, for the Helm chart, installed as a release) and
// run (install_test.go).
package install_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// installPath is one way to install the operator.
type installPath struct {
	name string
	// render returns the objects the path installs.
	render func(t *testing.T) objects
	// install installs the path on the control plane; nil for a path
	// only rendered and checked: one that needs what the test control
	// plane lacks (cert-manager). applyObjects applies the rendered
	// objects; a Helm chart would install its release instead.
	install func(ctx context.Context, t *testing.T, env *envtest.Environment, objs objects)
}

// paths are the install paths under test.
func paths() []installPath {
	return []installPath{
		{name: "kustomize config/default", render: kustomize("config/default"), install: applyObjects},
		{name: "kustomize, renamed", render: kustomize("test/install/testdata/renamed"), install: applyObjects},
		{name: "kustomize, renamed, cert-manager", render: kustomize("test/install/testdata/renamed-certmanager")},
		{name: "dist/install.yaml", render: installer, install: applyObjects},
		{name: "helm chart", render: chartObjects, install: installChart},
	}
}

// chartObjects renders the chart with its default values, as Helm would
// install it as release cleanup-operator in cleanup-operator-system.
func chartObjects(t *testing.T) objects {
	t.Helper()
	objs, err := renderChartObjects(loadChart(t), nil)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	var out objects
	for _, o := range objs {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out
}

// installChart installs the chart's release with Helm's library, as
// `helm install --create-namespace` does; the objects rendered are what the
// manager is then started from.
func installChart(ctx context.Context, t *testing.T, env *envtest.Environment, _ objects) {
	t.Helper()
	if err := helmInstall(ctx, env.Config, releaseNamespace, nil); err != nil {
		t.Fatal(err)
	}
}

// kustomize renders a kustomization of the repository with kustomize's API.
func kustomize(dir string) func(t *testing.T) objects {
	return func(t *testing.T) objects {
		t.Helper()
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), dir))
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		raw, err := m.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		return decodeAll(t, raw)
	}
}

// installer runs `make build-installer` and reads the dist/install.yaml it
// writes.
func installer(t *testing.T) objects {
	t.Helper()
	cmd := exec.Command("make", "-s", "build-installer")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, raw)
}

func decodeAll(t *testing.T, raw []byte) objects {
	t.Helper()
	var out objects
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// managerBinary is the manager `make test` builds before this module runs.
func managerBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testenv.RepoRoot(), "bin", "manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no %s: run 'go build -o bin/manager ./cmd' (make test does)", bin)
	}
	return bin
}

// TestReferencesResolve renders each path and checks that every reference
// in it resolves.
func TestReferencesResolve(t *testing.T) {
	flags, err := managerFlags(managerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths() {
		t.Run(p.name, func(t *testing.T) {
			objs := p.render(t)
			for _, e := range checkReferences(objs, flags) {
				t.Error(e)
			}
		})
	}
}

// TestReferenceCheckFindsBreaks breaks each kind of reference in a copy of
// the cert-manager install and expects the check to name it.
func TestReferenceCheckFindsBreaks(t *testing.T) {
	flags, err := managerFlags(managerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	good := kustomize("test/install/testdata/renamed-certmanager")(t)
	if errs := checkReferences(good, flags); len(errs) != 0 {
		t.Fatalf("the unbroken install: %v", errs)
	}
	breaks := map[string]func(o objects){
		"issuer": func(o objects) { set(t, o, "Certificate", "selfsigned-issuer", "spec", "issuerRef", "name") },
		"dnsNames": func(o objects) {
			setSlice(t, o, "Certificate", []string{"webhook-service.system.svc"}, "spec", "dnsNames")
		},
		"service selector":  func(o objects) { set(t, o, "Service", "other", "spec", "selector", "control-plane") },
		"webhook service":   func(o objects) { setHook(t, o, "name", "webhook-service") },
		"webhook namespace": func(o objects) { setHook(t, o, "namespace", "system") },
		"ca injection": func(o objects) {
			o.ofKind("ValidatingWebhookConfiguration")[0].SetAnnotations(map[string]string{"cert-manager.io/inject-ca-from": "system/serving-cert"})
		},
		"serviceAccountName": func(o objects) {
			set(t, o, "Deployment", "controller-manager", "spec", "template", "spec", "serviceAccountName")
		},
		"roleRef":      func(o objects) { set(t, o, "RoleBinding", "leader-election-role", "roleRef", "name") },
		"unknown flag": func(o objects) { appendArg(t, o, "--no-such-flag=1") },
		"secret flag":  func(o objects) { appendArg(t, o, "--webhook-secret-name=webhook-server-cert") },
	}
	for name, breakIt := range breaks {
		t.Run(name, func(t *testing.T) {
			o := kustomize("test/install/testdata/renamed-certmanager")(t)
			breakIt(o)
			if errs := checkReferences(o, flags); len(errs) == 0 {
				t.Errorf("breaking the %s went unnoticed", name)
			}
		})
	}
}

// set sets a field of the first object of a kind.
func set(t *testing.T, o objects, kind, value string, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(o.ofKind(kind)[0].Object, value, path...); err != nil {
		t.Fatal(err)
	}
}

func setSlice(t *testing.T, o objects, kind string, value []string, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedStringSlice(o.ofKind(kind)[0].Object, value, path...); err != nil {
		t.Fatal(err)
	}
}

// setHook sets a field of the first webhook's service reference.
func setHook(t *testing.T, o objects, field, value string) {
	t.Helper()
	vwc := o.ofKind("ValidatingWebhookConfiguration")[0]
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	if err := unstructured.SetNestedField(hooks[0].(map[string]any), value, "clientConfig", "service", field); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(vwc.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
}

// appendArg adds an arg to the manager container.
func appendArg(t *testing.T, o objects, arg string) {
	t.Helper()
	d := o.ofKind("Deployment")[0]
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	c["args"] = append(c["args"].([]any), arg)
	if err := unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}
