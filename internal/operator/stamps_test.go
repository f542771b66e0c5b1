package operator

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// TestTransformKeepsOnlyTheOperatorsStamps: the cache keeps a stamp
// annotation only when the operator's field manager owns it; one written by
// anyone else is dropped, on typed and unstructured objects, and nothing
// else of the object changes.
func TestTransformKeepsOnlyTheOperatorsStamps(t *testing.T) {
	owned := func(manager, key string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + key + `":{}}}}`)}}
	}
	for name, tc := range map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		"the operator's":                {[]metav1.ManagedFieldsEntry{owned(v1alpha1.FieldManager, v1alpha1.OrphaningAnnotation)}, true},
		"shared with the operator":      {[]metav1.ManagedFieldsEntry{owned("kubectl", v1alpha1.OrphaningAnnotation), owned(v1alpha1.FieldManager, v1alpha1.OrphaningAnnotation)}, true},
		"another manager's":             {[]metav1.ManagedFieldsEntry{owned("kubectl-patch", v1alpha1.OrphaningAnnotation)}, false},
		"the operator owns another one": {[]metav1.ManagedFieldsEntry{owned(v1alpha1.FieldManager, v1alpha1.PruneAnnotation)}, false},
		"no managed fields":             {nil, false},
	} {
		w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "c1", ManagedFields: tc.entries,
			Annotations: map[string]string{v1alpha1.OrphaningAnnotation: "Orphan", "example.com/note": "x"}}}
		out, err := Transform(w)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*workv1.ManifestWork).Annotations
		if _, has := got[v1alpha1.OrphaningAnnotation]; has != tc.want {
			t.Errorf("%s: typed: stamp kept %v, want %v", name, has, tc.want)
		}
		if got["example.com/note"] != "x" {
			t.Errorf("%s: typed: another annotation lost: %v", name, got)
		}

		cp := &unstructured.Unstructured{}
		cp.SetAPIVersion("policy.open-cluster-management.io/v1")
		cp.SetKind("ConfigurationPolicy")
		cp.SetManagedFields(renamed(tc.entries, v1alpha1.OrphaningAnnotation, v1alpha1.PruneAnnotation))
		cp.SetAnnotations(map[string]string{v1alpha1.PruneAnnotation: "DeleteIfCreated"})
		out, err = Transform(cp)
		if err != nil {
			t.Fatal(err)
		}
		if _, has := out.(*unstructured.Unstructured).GetAnnotations()[v1alpha1.PruneAnnotation]; has != (tc.want && name != "the operator owns another one") {
			t.Errorf("%s: unstructured: stamp kept %v", name, has)
		}
		if len(out.(*unstructured.Unstructured).GetManagedFields()) != 0 {
			t.Errorf("%s: managedFields cached", name)
		}
	}
}

// renamed is entries with the annotation key from swapped for to, and to
// for from.
func renamed(entries []metav1.ManagedFieldsEntry, from, to string) []metav1.ManagedFieldsEntry {
	out := make([]metav1.ManagedFieldsEntry, len(entries))
	for i, e := range entries {
		raw := string(e.FieldsV1.Raw)
		switch {
		case strings.Contains(raw, from):
			raw = strings.ReplaceAll(raw, from, to)
		case strings.Contains(raw, to):
			raw = strings.ReplaceAll(raw, to, from)
		}
		e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(raw)}
		out[i] = e
	}
	return out
}
