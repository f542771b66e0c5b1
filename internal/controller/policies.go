package controller

import (
	"context"
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// CleanupPolicies are read unstructured and decoded one by one. A typed
// informer decodes the whole list at once: one stored policy it cannot
// decode (a timeout written before the schema refused it) would fail every
// list, and the operator would see no policy at all. Read this way, that
// policy alone is reported, and the clusters it governs are held.
// Nothing in the operator may read CleanupPolicies typed from the cache.
var cleanupPolicyGVK = v1alpha1.GroupVersion.WithKind("CleanupPolicy")

func newCleanupPolicy() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(cleanupPolicyGVK)
	return u
}

func newCleanupPolicyList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(cleanupPolicyGVK.GroupVersion().WithKind("CleanupPolicyList"))
	return l
}

// listPolicies lists every CleanupPolicy as stored, undecoded.
func listPolicies(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	list := newCleanupPolicyList()
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing CleanupPolicies: %w", err)
	}
	return list.Items, nil
}

// decodePolicy decodes one stored CleanupPolicy as the typed API would. A
// field the typed API cannot hold is returned as an error naming it; the
// policy returned then carries the metadata and the status only, enough to
// report on it. u is not changed.
func decodePolicy(u *unstructured.Unstructured) (*v1alpha1.CleanupPolicy, field.ErrorList) {
	p := &v1alpha1.CleanupPolicy{}
	err := decodeInto(u.Object, p)
	if err == nil {
		return p, nil
	}
	p = &v1alpha1.CleanupPolicy{}
	p.SetGroupVersionKind(cleanupPolicyGVK)
	// The API server validated the metadata; a status it let through that
	// does not decode is left out, and rewritten by the next status patch.
	md, _ := u.Object["metadata"].(map[string]any)
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(md, &p.ObjectMeta)
	if st, ok := u.Object["status"].(map[string]any); ok {
		if decodeInto(st, &p.Status) != nil {
			p.Status = v1alpha1.CleanupPolicyStatus{}
		}
	}
	errs := locate(field.NewPath("spec"), u.Object["spec"], reflect.TypeFor[v1alpha1.CleanupPolicySpec]())
	if len(errs) == 0 {
		errs = field.ErrorList{field.Invalid(field.NewPath("spec"), field.OmitValueType{}, undecodable(err))}
	}
	return p, errs
}

// decodeInto decodes a stored value into out through JSON, as the typed
// client does: an integer that overflows its field, or a duration that
// does not parse, is an error here, not a truncated value.
func decodeInto(v any, out any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
var jsonUnmarshaler = reflect.TypeFor[interface{ UnmarshalJSON([]byte) error }]()

// locate finds the fields of v that do not decode into t, deepest first:
// it descends into the fields, items and entries that fail, and reports a
// value that fails while all its parts decode, or that has no parts.
func locate(path *field.Path, v any, t reflect.Type) field.ErrorList {
	err := decodeInto(v, reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	leaf := func() field.ErrorList {
		var value any = field.OmitValueType{}
		switch v.(type) {
		case string, bool, int64, float64, nil:
			value = v
		}
		return field.ErrorList{field.Invalid(path, value, undecodable(err))}
	}
	custom := reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
	var errs field.ErrorList
	switch {
	case t.Kind() == reflect.Pointer:
		return locate(path, v, t.Elem())
	case custom:
		return leaf()
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return leaf()
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported():
			case name == "" && (f.Anonymous || strings.Contains(opts, "inline")):
				errs = append(errs, locate(path, v, f.Type)...)
			case name != "":
				if fv, ok := m[name]; ok {
					errs = append(errs, locate(path.Child(name), fv, f.Type)...)
				}
			}
		}
	case t.Kind() == reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return leaf()
		}
		for i, item := range items {
			errs = append(errs, locate(path.Index(i), item, t.Elem())...)
		}
	case t.Kind() == reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return leaf()
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			errs = append(errs, locate(path.Key(k), m[k], t.Elem())...)
		}
	}
	if len(errs) == 0 {
		return leaf()
	}
	return errs
}

func undecodable(err error) string {
	return "stored, but the operator cannot read it: " + err.Error()
}
