package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	apierrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	registrybundle "github.com/operator-framework/operator-registry/pkg/lib/bundle"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const root = "../../.."

var committedBundle = filepath.Join(root, BundleDir)

// testOptions are the options `make bundle` passes (the Makefile sets the
// same BUNDLE_* variables for the check); where one is unset, as in a bare
// `go test`, it is read back from the committed bundle, so that the check
// still catches a bundle that config/ has moved away from.
func testOptions(t *testing.T) Options {
	t.Helper()
	o := OptionsFromEnv()
	o.Root = root
	csv := readCSV(t, committedBundle)
	if o.Version == "" {
		o.Version = csv.Spec.Version.String()
	}
	if o.Image == "" {
		o.Image = csv.Annotations["containerImage"]
	}
	if len(o.Channels) == 0 || o.DefaultChannel == "" {
		a := readAnnotations(t, committedBundle)
		if len(o.Channels) == 0 {
			o.Channels = splitList(a["operators.operatorframework.io.bundle.channels.v1"])
		}
		if o.DefaultChannel == "" {
			o.DefaultChannel = a["operators.operatorframework.io.bundle.channel.default.v1"]
		}
	}
	return o
}

// The committed bundle is what `make bundle` renders from config/ now.
func TestCommittedBundleIsCurrent(t *testing.T) {
	b, err := Generate(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range b.LeftOut {
		t.Logf("left out %s: %s", l.Object, l.Reason)
	}
	want := map[string][]byte{}
	for _, f := range b.Files {
		want[f.Path] = f.Data
	}
	got := map[string][]byte{}
	err = filepath.WalkDir(committedBundle, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		got[filepath.ToSlash(rel)], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[DockerfilePath], err = os.ReadFile(filepath.Join(root, DockerfilePath)); err != nil {
		t.Fatal(err)
	}
	var stale []string
	for path, data := range want {
		switch have, ok := got[path]; {
		case !ok:
			stale = append(stale, path+": missing")
		case !bytes.Equal(have, data):
			stale = append(stale, path+": differs, "+firstDifference(have, data))
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			stale = append(stale, path+": no longer generated")
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		t.Errorf("the committed bundle is stale; run `make bundle` and commit:\n  %s", strings.Join(stale, "\n  "))
	}
}

// The committed bundle passes operator-framework's default validators and
// the operatorframework suite, and operator-registry's format and content
// checks, with no error.
func TestCommittedBundleIsValid(t *testing.T) {
	r := validate(t, committedBundle)
	for _, w := range r.warnings {
		t.Logf("warning: %s", w)
	}
	for _, e := range r.errors {
		t.Errorf("error: %s", e)
	}
	if unaccepted := r.unaccepted(); len(unaccepted) > 0 {
		t.Errorf("warnings not in acceptedWarnings (fix them, or accept them there with the reason):\n  %s", strings.Join(unaccepted, "\n  "))
	}
}

// acceptedWarnings are validator warnings the bundle is allowed to raise,
// each with the reason. Any other warning fails the check, so a new one is
// a decision. docs/install/olm.md lists them too.
var acceptedWarnings = []struct{ contains, why string }{{
	contains: `channel(s) ["alpha"] are not following the recommended naming convention`,
	why: "the API is v1alpha1 and the operator has not had a release: alpha says so; " +
		"the channels move to candidate/fast/stable with the first release (CHANNELS in the Makefile)",
}, {
	contains: `removed in v1.25. More info: https://kubernetes.io/docs/reference/using-api/deprecation-guide/#v1-25. Migrate the API(s) for events: (["ClusterServiceVersion.Spec.InstallStrategy.StrategySpec.ClusterPermissions`,
	why: "a false positive: RBAC rules name no API version; the rule is for events.k8s.io events, " +
		"which the operator writes with events.k8s.io/v1 (GA since Kubernetes 1.19), not the v1beta1 removed in 1.25",
}}

// A broken bundle is reported: the check can fail.
func TestBrokenBundlesAreRejected(t *testing.T) {
	cases := []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  string
	}{{
		name: "CSV without a deployment",
		spoil: editCSV(func(csv map[string]any) {
			unstructured.RemoveNestedField(csv, "spec", "install", "spec", "deployments")
		}),
		want: "deployment",
	}, {
		name: "alm-examples not JSON",
		spoil: editCSV(func(csv map[string]any) {
			_ = unstructured.SetNestedField(csv, "[{", "metadata", "annotations", "alm-examples")
		}),
		want: "invalid example",
	}, {
		name: "no install mode supported",
		spoil: editCSV(func(csv map[string]any) {
			_ = unstructured.SetNestedSlice(csv, []any{map[string]any{"type": "AllNamespaces", "supported": false}}, "spec", "installModes")
		}),
		want: "none of InstallModeTypes are supported",
	}, {
		name: "version not semantic",
		spoil: editCSV(func(csv map[string]any) {
			_ = unstructured.SetNestedField(csv, "one", "spec", "version")
		}),
		want: "version",
	}, {
		name: "owned CRD missing",
		spoil: func(t *testing.T, dir string) {
			remove(t, filepath.Join(dir, "manifests", "cleanup.fleetops.dev_cleanuppolicies.yaml"))
		},
		want: "cleanuppolicies.cleanup.fleetops.dev",
	}, {
		name: "annotations without a package",
		spoil: func(t *testing.T, dir string) {
			path := filepath.Join(dir, "metadata", "annotations.yaml")
			a := readAnnotations(t, dir)
			delete(a, "operators.operatorframework.io.bundle.package.v1")
			write(t, path, map[string]any{"annotations": a})
		},
		want: "package",
	}, {
		name: "a kind a bundle cannot carry",
		spoil: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "manifests", "extra_apps_v1_deployment.yaml"), map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "extra"},
			})
		},
		want: "Deployment is not supported",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, committedBundle)
			c.spoil(t, dir)
			r := validate(t, dir)
			if len(r.errors) == 0 {
				t.Fatalf("no error reported; warnings: %v", r.warnings)
			}
			if !slices.ContainsFunc(r.errors, func(e string) bool { return strings.Contains(e, c.want) }) {
				t.Errorf("no error mentions %q:\n  %s", c.want, strings.Join(r.errors, "\n  "))
			}
		})
	}
}

// results are the errors and warnings of every check, each prefixed with
// the check that raised it.
type results struct{ errors, warnings []string }

func (r results) unaccepted() []string {
	var out []string
	for _, w := range r.warnings {
		if !slices.ContainsFunc(acceptedWarnings, func(a struct{ contains, why string }) bool { return strings.Contains(w, a.contains) }) {
			out = append(out, w)
		}
	}
	return out
}

// validate runs every check on the bundle in dir.
func validate(t *testing.T, dir string) results {
	t.Helper()
	var r results
	add := func(check string, rs []apierrors.ManifestResult) {
		for _, res := range rs {
			for _, e := range res.Errors {
				r.errors = append(r.errors, fmt.Sprintf("%s: %s", check, e))
			}
			for _, w := range res.Warnings {
				r.warnings = append(r.warnings, fmt.Sprintf("%s: %s", check, w))
			}
		}
	}

	b, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		r.errors = append(r.errors, "GetBundleFromDir: "+err.Error())
	} else {
		objs := b.ObjectsToValidate()
		add("default", validation.DefaultBundleValidators.Validate(objs...))
		add("operatorframework", operatorFrameworkSuite.Validate(append(objs, optionalValues(b))...))
	}

	logger := logrus.New()
	logger.SetOutput(io.Discard)
	v := registrybundle.NewImageValidator(nil, logrus.NewEntry(logger), "bundle-objects")
	for check, err := range map[string]error{
		"registry format":  v.ValidateBundleFormat(dir),
		"registry content": v.ValidateBundleContent(filepath.Join(dir, "manifests")),
	} {
		if err == nil {
			continue
		}
		if ve, ok := err.(registrybundle.ValidationError); ok {
			for _, e := range ve.Errors {
				r.errors = append(r.errors, fmt.Sprintf("%s: %s", check, e))
			}
		} else {
			r.errors = append(r.errors, fmt.Sprintf("%s: %s", check, err))
		}
	}
	sort.Strings(r.errors)
	sort.Strings(r.warnings)
	return r
}

// operatorFrameworkSuite is what `operator-sdk bundle validate
// --select-optional suite=operatorframework` runs, with the OperatorHub
// validator in its current form (OperatorHubV2 with the capabilities and
// categories checks), and the object validator. The multiple-architectures
// validator is left out: it inspects the images in a registry.
var operatorFrameworkSuite = interfaces.Validators{
	validation.OperatorHubV2Validator,
	validation.StandardCapabilitiesValidator,
	validation.StandardCategoriesValidator,
	validation.GoodPracticesValidator,
	validation.AlphaDeprecatedAPIsValidator,
	validation.ObjectValidator,
}

// optionalValues tell the deprecated-API validator the oldest Kubernetes
// the bundle installs on: an API removed by then is an error.
func optionalValues(b *manifests.Bundle) map[string]string {
	v := map[string]string{}
	if b.CSV != nil && b.CSV.Spec.MinKubeVersion != "" {
		parts := strings.SplitN(b.CSV.Spec.MinKubeVersion, ".", 3)
		if len(parts) >= 2 {
			v["k8s-version"] = parts[0] + "." + parts[1]
		}
	}
	return v
}

// The generator's list of kinds a bundle may carry is operator-registry's.
func TestBundleKindsAreRegistrys(t *testing.T) {
	for kind, namespaced := range bundleKinds {
		ok, ns := registrybundle.IsSupported(kind)
		if !ok || bool(ns) != namespaced {
			t.Errorf("%s: the generator says namespaced=%v; operator-registry says supported=%v namespaced=%v", kind, namespaced, ok, ns)
		}
	}
}

// Every field at the top of the spec and of the status has a descriptor.
func TestEveryTopLevelFieldHasADescriptor(t *testing.T) {
	csv, crds := generated(t)
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			i := slices.IndexFunc(csv.Spec.CustomResourceDefinitions.Owned, func(d v1alpha1.CRDDescription) bool {
				return d.Name == crd.Name && d.Version == v.Name
			})
			if i < 0 {
				t.Fatalf("%s %s is not owned by the CSV", crd.Name, v.Name)
			}
			d := csv.Spec.CustomResourceDefinitions.Owned[i]
			for field := range v.Schema.OpenAPIV3Schema.Properties["spec"].Properties {
				if !slices.ContainsFunc(d.SpecDescriptors, func(s v1alpha1.SpecDescriptor) bool { return s.Path == field }) {
					t.Errorf("%s %s: spec.%s has no descriptor in config/manifests/bases", crd.Name, v.Name, field)
				}
			}
			for field := range v.Schema.OpenAPIV3Schema.Properties["status"].Properties {
				if !slices.ContainsFunc(d.StatusDescriptors, func(s v1alpha1.StatusDescriptor) bool { return s.Path == field }) {
					t.Errorf("%s %s: status.%s has no descriptor in config/manifests/bases", crd.Name, v.Name, field)
				}
			}
		}
	}
}

// --- helpers ---

var (
	buildOnce sync.Once
	buildObjs []*unstructured.Unstructured
	buildErr  error
)

// built is the kustomize build of config/manifests, made once; each call
// gets its own copy.
func built(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	buildOnce.Do(func() { buildObjs, buildErr = kustomizeBuild(filepath.Join(root, ManifestsSource)) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	out := make([]*unstructured.Unstructured, len(buildObjs))
	for i, u := range buildObjs {
		out[i] = u.DeepCopy()
	}
	return out
}

func readCSV(t *testing.T, dir string) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	if len(matches) != 1 {
		t.Fatalf("%s: want one CSV, found %v", dir, matches)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	readYAML(t, matches[0], csv)
	return csv
}

func readAnnotations(t *testing.T, dir string) map[string]string {
	t.Helper()
	var a struct {
		Annotations map[string]string `json:"annotations"`
	}
	readYAML(t, filepath.Join(dir, "metadata", "annotations.yaml"), &a)
	return a.Annotations
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func write(t *testing.T, path string, obj any) {
	t.Helper()
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// editCSV returns a change of the CSV in a bundle directory.
func editCSV(edit func(csv map[string]any)) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		matches, _ := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
		if len(matches) != 1 {
			t.Fatalf("want one CSV, found %v", matches)
		}
		csv := map[string]any{}
		readYAML(t, matches[0], &csv)
		edit(csv)
		write(t, matches[0], csv)
	}
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// firstDifference names the first line where two renderings differ.
func firstDifference(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(h) || i < len(w); i++ {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			return fmt.Sprintf("line %d: committed %q, generated %q", i+1, hl, wl)
		}
	}
	return "same lines"
}
