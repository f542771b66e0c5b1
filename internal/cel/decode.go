package cel

import (
	"encoding"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// DecodePolicy decodes one stored CleanupPolicy, as JSON objects decode,
// as the typed API would. A field the typed API cannot hold (a timeout
// stored before the schema refused a word) is returned as an error naming
// it; the policy returned then carries the metadata and the status only,
// enough to report on it. obj is not changed.
func DecodePolicy(obj map[string]any) (*v1alpha1.CleanupPolicy, field.ErrorList) {
	p := &v1alpha1.CleanupPolicy{}
	err := decodeInto(obj, p)
	if err == nil {
		return p, nil
	}
	p = &v1alpha1.CleanupPolicy{}
	p.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicy"))
	// The API server validated the metadata; a status it let through that
	// does not decode is left out, and rewritten by the next status patch.
	md, _ := obj["metadata"].(map[string]any)
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(md, &p.ObjectMeta)
	if st, ok := obj["status"].(map[string]any); ok {
		if decodeInto(st, &p.Status) != nil {
			p.Status = v1alpha1.CleanupPolicyStatus{}
		}
	}
	errs := locate(field.NewPath("spec"), obj["spec"], reflect.TypeFor[v1alpha1.CleanupPolicySpec]())
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
		errs = locateFields(path, m, t)
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

// locateFields finds the fields of the object m that do not decode into
// the fields of the struct t, as locate does.
func locateFields(path *field.Path, m map[string]any, t reflect.Type) field.ErrorList {
	var errs field.ErrorList
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name == "" && (f.Anonymous || strings.Contains(opts, "inline")):
			errs = append(errs, locate(path, m, f.Type)...)
		case name != "":
			if fv, ok := m[name]; ok {
				errs = append(errs, locate(path.Child(name), fv, f.Type)...)
			}
		}
	}
	return errs
}

func undecodable(err error) string {
	return "stored, but the operator cannot read it: " + err.Error()
}
