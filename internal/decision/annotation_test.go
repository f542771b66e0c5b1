package decision_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Annotation reads what GetAnnotations gives, for unstructured objects of
// every shape and for typed ones.
func TestAnnotation(t *testing.T) {
	for name, metadata := range map[string]any{
		"none":                 map[string]any{},
		"the key":              map[string]any{"annotations": map[string]any{"k": "v", "o": "w"}},
		"another key":          map[string]any{"annotations": map[string]any{"o": "w"}},
		"empty value":          map[string]any{"annotations": map[string]any{"k": ""}},
		"null value":           map[string]any{"annotations": map[string]any{"k": nil}},
		"a value not a string": map[string]any{"annotations": map[string]any{"k": "v", "o": 7}},
		"annotations null":     map[string]any{"annotations": nil},
		"annotations a list":   map[string]any{"annotations": []any{"k"}},
		"metadata a string":    "odd",
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": metadata}}
		wantV, wantOK := u.GetAnnotations()["k"]
		if v, ok := decision.Annotation(u, "k"); v != wantV || ok != wantOK {
			t.Errorf("%s: got %q, %v; want %q, %v", name, v, ok, wantV, wantOK)
		}
	}
	typed := &metav1.ObjectMeta{Annotations: map[string]string{"k": "v"}}
	if v, ok := decision.Annotation(typed, "k"); v != "v" || !ok {
		t.Errorf("typed: got %q, %v", v, ok)
	}
}
