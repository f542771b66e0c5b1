package cel

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

func TestDecodePolicy(t *testing.T) {
	base := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cleanup.fleetops.dev/v1alpha1",
			"kind":       "CleanupPolicy",
			"metadata":   map[string]any{"name": "p", "uid": "u-1", "generation": int64(3)},
			"spec":       spec,
			"status": map[string]any{"observedGeneration": int64(2), "conditions": []any{map[string]any{
				"type": "Ready", "status": "True", "reason": "Succeeded", "message": "ok",
				"lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": int64(2),
			}}},
		}}
	}
	cases := []struct {
		name string
		spec map[string]any
		// paths are the fields the errors must name, in order; none: it decodes.
		paths []string
		// detail is a part of the first error's message.
		detail string
	}{
		{name: "valid", spec: map[string]any{
			"priority":       int64(7),
			"removeStrategy": map[string]any{"default": "Required", "timeout": "1h30m"},
			"deletionSignal": map[string]any{"manifests": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}},
		}},
		{name: "a timeout that is a word", spec: map[string]any{
			"removeStrategy": map[string]any{"default": "Required", "timeout": "soon"},
		}, paths: []string{"spec.removeStrategy.timeout"}, detail: `invalid duration "soon"`},
		{name: "a timeout that is a number", spec: map[string]any{
			"removeStrategy": map[string]any{"default": "Required", "timeout": int64(30)},
		}, paths: []string{"spec.removeStrategy.timeout"}},
		{name: "a priority past int32", spec: map[string]any{
			"priority":       int64(1) << 40,
			"removeStrategy": map[string]any{"default": "Required"},
		}, paths: []string{"spec.priority"}},
		{name: "a variable name that is not a string", spec: map[string]any{
			"variables":      []any{map[string]any{"name": "ok", "expression": "1"}, map[string]any{"name": int64(1), "expression": "1"}},
			"removeStrategy": map[string]any{"default": "Required"},
		}, paths: []string{"spec.variables[1].name"}},
		{name: "two fields at once, both named", spec: map[string]any{
			"priority":       "high",
			"removeStrategy": map[string]any{"default": "Required", "timeout": "-"},
		}, paths: []string{"spec.priority", "spec.removeStrategy.timeout"}},
		{name: "an inlined field", spec: map[string]any{
			"removeStrategy":     map[string]any{"default": "Required"},
			"monitoredResources": []any{map[string]any{"version": "v1", "resource": []any{"pods"}}},
		}, paths: []string{"spec.monitoredResources[0].resource"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := base(tc.spec)
			before := u.DeepCopy()
			p, errs := DecodePolicy(u.Object)
			if len(before.Object) != len(u.Object) || !strings.EqualFold(before.GetName(), u.GetName()) {
				t.Fatalf("decodePolicy changed its input")
			}
			if p == nil || p.Name != "p" || p.UID != "u-1" || p.Generation != 3 {
				t.Fatalf("metadata not decoded: %+v", p)
			}
			if p.Status.ObservedGeneration != 2 || len(p.Status.Conditions) != 1 {
				t.Fatalf("status not decoded: %+v", p.Status)
			}
			if len(tc.paths) == 0 {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors: %v", errs)
				}
				if p.Spec.Priority != 7 || p.Spec.RemoveStrategy.Timeout.Duration != 90*time.Minute ||
					p.Spec.RemoveStrategy.Default != v1alpha1.RemoveStrategyRequired || len(p.Spec.DeletionSignal.Manifests) != 1 {
					t.Fatalf("spec not decoded: %+v", p.Spec)
				}
				return
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.paths, ",") {
				t.Fatalf("errors name %v, want %v: %v", got, tc.paths, errs)
			}
			if !strings.Contains(errs[0].Error(), tc.detail) || !strings.Contains(errs[0].Error(), "cannot read") {
				t.Fatalf("error %q does not say %q", errs[0].Error(), tc.detail)
			}
			if p.Spec.RemoveStrategy.Default != "" {
				t.Fatalf("a policy that does not decode must carry no spec: %+v", p.Spec)
			}
		})
	}
}
