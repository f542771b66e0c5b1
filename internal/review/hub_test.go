package review

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// TestSanitize drops the data of Secrets nested anywhere, last-applied
// annotations and managedFields, a signal work's too.
func TestSanitize(t *testing.T) {
	work := func(labels map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "w", "namespace": "c1", "labels": labels,
				"annotations":   map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "secret-in-here", "keep": "me"},
				"managedFields": []any{map[string]any{"manager": "cleanup-operator", "operation": "Apply"}}},
			"spec": map[string]any{"workload": map[string]any{"manifests": []any{
				map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"},
					"data": map[string]any{"k": "c2VjcmV0LWluLWhlcmU="}, "stringData": map[string]any{"k": "secret-in-here"}},
				map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": "v"}},
			}}},
		}}
	}
	plain := sanitize(work(nil))
	raw, _ := json.Marshal(plain.Object)
	for _, gone := range []string{"secret-in-here", "c2VjcmV0LWluLWhlcmU=", "managedFields"} {
		if strings.Contains(string(raw), gone) {
			t.Errorf("%s is still in %s", gone, raw)
		}
	}
	for _, kept := range []string{`"keep":"me"`, `"name":"s"`, `"data":{"k":"v"}`} {
		if !strings.Contains(string(raw), kept) {
			t.Errorf("%s is gone from %s", kept, raw)
		}
	}
	signal := sanitize(work(map[string]any{v1alpha1.SignalWorkLabel: "true"}))
	if len(signal.GetManagedFields()) != 0 {
		t.Errorf("a signal work's managedFields were kept")
	}
}
