package argocd

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
	"github.com/argoproj/gitops-engine/pkg/health"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

// configDir holds what is shipped for Argo CD: argocd-cm.yaml, and each
// health check in the layout of Argo CD's resource_customizations,
// <group>/<Kind>/health.lua with its health_test.yaml and testdata/.
var configDir = filepath.Join("..", "..", "..", "config", "argocd")

// shippedConfigMap reads config/argocd/argocd-cm.yaml as the ConfigMap it is.
func shippedConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(configDir, "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
		t.Fatalf("argocd-cm.yaml: %v", err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Name != common.ArgoCDConfigMapName || cm.Namespace == "" {
		t.Fatalf("argocd-cm.yaml is not Argo CD's ConfigMap: %s %s %s/%s", cm.APIVersion, cm.Kind, cm.Namespace, cm.Name)
	}
	return &cm
}

// healthOverrides loads the resource customizations of cm as Argo CD's
// application controller does: cm is served in its namespace, Argo CD's
// settings manager reads it there (only a ConfigMap labelled as part of
// Argo CD is seen), and its overrides are the Lua health checks.
func healthOverrides(t *testing.T, cm *corev1.ConfigMap) lua.ResourceHealthOverrides {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr := settings.NewSettingsManager(ctx, fake.NewClientset(cm.DeepCopy()), cm.Namespace)
	overrides, err := mgr.GetResourceOverrides()
	if err != nil {
		t.Fatalf("Argo CD does not load argocd-cm.yaml: %v", err)
	}
	return lua.ResourceHealthOverrides(overrides)
}

// healthCase is one case of a health_test.yaml.
type healthCase struct {
	name   string // <group>/<Kind>/<inputPath>
	want   health.HealthStatus
	object *unstructured.Unstructured
}

// healthCases reads every health_test.yaml under config/argocd.
func healthCases(t *testing.T) []healthCase {
	t.Helper()
	var cases []healthCase
	err := filepath.WalkDir(configDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "health_test.yaml" {
			return err
		}
		dir := filepath.Dir(path)
		rel, err := filepath.Rel(configDir, dir)
		if err != nil {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var tests struct {
			Tests []struct {
				HealthStatus health.HealthStatus `json:"healthStatus"`
				InputPath    string              `json:"inputPath"`
			} `json:"tests"`
		}
		if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, tc := range tests.Tests {
			obj := readObject(t, filepath.Join(dir, tc.InputPath))
			if gk := obj.GroupVersionKind().GroupKind(); gk.Group+"/"+gk.Kind != filepath.ToSlash(rel) {
				t.Fatalf("%s/%s is a %s, not a %s", rel, tc.InputPath, gk, rel)
			}
			cases = append(cases, healthCase{name: filepath.ToSlash(filepath.Join(rel, tc.InputPath)), want: tc.HealthStatus, object: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no health_test.yaml under %s", configDir)
	}
	return cases
}

// readObject reads a YAML object as Argo CD's controller holds objects it
// reads from the API server: unstructured, integers as int64.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

// TestShippedHealthChecks evaluates every case of every health_test.yaml
// with the checks of the shipped argocd-cm.yaml, through gitops-engine's
// GetResourceHealth with Argo CD's Lua health overrides, as the application
// controller computes a resource's health (controller/health.go), and
// compares status and message exactly.
func TestShippedHealthChecks(t *testing.T) {
	cm := shippedConfigMap(t)
	overrides := healthOverrides(t, cm)
	cases := healthCases(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := lua.GetConfigMapKey(tc.object.GroupVersionKind())
			override, ok := overrides[key]
			if !ok || override.HealthLua == "" {
				t.Fatalf("argocd-cm.yaml has no health check for %s", key)
			}
			// The check needs only the libraries Argo CD opens for every
			// custom check, as docs/policies/gitops.md says.
			if override.UseOpenLibs {
				t.Errorf("argocd-cm.yaml turns on useOpenLibs for %s", key)
			}
			got, err := health.GetResourceHealth(tc.object, overrides)
			if err != nil {
				t.Fatalf("Argo CD shows %v: %v", got, err)
			}
			if got == nil {
				t.Fatalf("Argo CD has no health for %s", key)
			}
			if *got != tc.want {
				t.Errorf("got  %s: %q\nwant %s: %q", got.Status, got.Message, tc.want.Status, tc.want.Message)
			}
		})
	}
	t.Logf("%d cases evaluated through Argo CD", len(cases))
}

// TestDeletingObjectsArePendingDeletion evaluates every case again as an
// object being deleted: Argo CD answers before any health check runs, so
// what the script would say of a deleting object is never shown.
func TestDeletingObjectsArePendingDeletion(t *testing.T) {
	overrides := healthOverrides(t, shippedConfigMap(t))
	for _, tc := range healthCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.object.DeepCopy()
			deleted := metav1.NewTime(time.Date(2025, 5, 1, 11, 0, 0, 0, time.UTC))
			obj.SetDeletionTimestamp(&deleted)
			obj.SetFinalizers([]string{"cleanup.fleetops.dev/in-use"})
			got, err := health.GetResourceHealth(obj, overrides)
			if err != nil {
				t.Fatal(err)
			}
			want := health.HealthStatus{Status: health.HealthStatusProgressing, Message: "Pending deletion"}
			if got == nil || *got != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// TestLuaLibraries checks that this test runs a check with what Argo CD opens
// and no more: a check calling string.format fails to Unknown, with the
// error Argo CD shows, unless the ConfigMap sets useOpenLibs for its kind.
func TestLuaLibraries(t *testing.T) {
	shipped := shippedConfigMap(t)
	obj := healthCases(t)[0].object
	groupKind := obj.GroupVersionKind().Group + "_" + obj.GetKind()
	cm := shipped.DeepCopy()
	for key := range cm.Data {
		if strings.HasPrefix(key, "resource.customizations.") {
			delete(cm.Data, key)
		}
	}
	cm.Data["resource.customizations.health."+groupKind] = `return {status = string.format("%s", "Healthy")}`

	got, err := health.GetResourceHealth(obj, healthOverrides(t, cm))
	if err == nil || got == nil || got.Status != health.HealthStatusUnknown ||
		!strings.Contains(got.Message, "attempt to index a non-table object(nil) with key 'format'") {
		t.Errorf("string.format without useOpenLibs: got %v, %v; want Unknown with Lua's error", got, err)
	}

	cm.Data["resource.customizations.useOpenLibs."+groupKind] = "true"
	got, err = health.GetResourceHealth(obj, healthOverrides(t, cm))
	if err != nil || got == nil || got.Status != health.HealthStatusHealthy {
		t.Errorf("string.format with useOpenLibs: got %v, %v; want Healthy", got, err)
	}
}
