package cel

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
)

// toVal adapts an unstructured value of schema s for CEL, lazily: nothing
// below it is converted until an expression reads it. Objects with typed
// properties, and lists of them, are read by objectVal and listVal, whose
// field selection and indexing are the hot path of every expression; every
// other value is the API server library's adapter's, to which they also
// delegate iteration of keys, equality and conversions.
func toVal(v any, s *cachedSchema) ref.Val {
	if s.intOrString {
		return common.UnstructuredToVal(v, s)
	}
	switch v := v.(type) {
	case map[string]any:
		if s.typ == "object" && (s.embedded || s.properties != nil) {
			if s.embedded {
				s = s.WithTypeAndObjectMeta().(*cachedSchema)
			}
			return &objectVal{value: v, schema: s}
		}
	case []any:
		if items, ok := s.items.(*cachedSchema); ok && s.typ == "array" && isObject(items) {
			switch s.listType {
			case "", "atomic", "set", "map":
				return &listVal{elements: v, schema: s, items: items}
			}
		}
	}
	return common.UnstructuredToVal(v, s)
}

// isObject says whether toVal adapts a map of schema s as an objectVal.
func isObject(s *cachedSchema) bool {
	return s.typ == "object" && !s.intOrString && (s.embedded || s.properties != nil)
}

// objectVal is an object with typed properties, as the API server library
// adapts it, with a field selection that neither runs the unescaping
// pattern on plain field names nor allocates a look-up function per object.
// Iteration, equality and conversions are the library's own.
type objectVal struct {
	value  map[string]any
	schema *cachedSchema
	// defaults says which maps an expression sees though value may lack
	// them (see withMetadataMaps).
	defaults defaults
}

// defaults are the maps an object of a variable always has.
type defaults uint8

const (
	// noDefaults: the object is what value holds.
	noDefaults defaults = iota
	// rootDefaults: the object is a variable's; it has metadata, whose
	// labels and annotations are maps.
	rootDefaults
	// metadataDefaults: the object is a variable's metadata; its labels
	// and annotations are maps.
	metadataDefaults
)

// emptyMap stands for the maps an object lacks. It is never written.
var emptyMap = map[string]any{}

var _ traits.Mapper = (*objectVal)(nil)

// seen is the object an expression sees: value with the maps it lacks.
// Only iteration, equality and conversions need it whole.
func (o *objectVal) seen() map[string]any { return seenWith(o.value, o.defaults) }

// library is the API server library's adapter of the same object.
func (o *objectVal) library() ref.Val { return common.UnstructuredToVal(o.seen(), o.schema) }

// libraryOf is v as the library's adapter sees it.
func libraryOf(v ref.Val) ref.Val {
	switch v := v.(type) {
	case *objectVal:
		return v.library()
	case *listVal:
		return v.library()
	case *dynVal:
		return v.library()
	}
	return v
}

// seenWith is value with the maps defaults says it has.
func seenWith(value map[string]any, d defaults) map[string]any {
	switch d {
	case rootDefaults:
		return withMetadataMaps(value)
	case metadataDefaults:
		if md, ok := withMetadataMaps(map[string]any{"metadata": value})["metadata"].(map[string]any); ok {
			return md
		}
	}
	return value
}

func (o *objectVal) Find(key ref.Val) (ref.Val, bool) {
	keyStr, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), true
	}
	k := string(keyStr)
	// A name holding no escape sequence unescapes to itself.
	if strings.Contains(k, "__") {
		if k, ok = apiservercel.Unescape(k); !ok {
			return nil, false
		}
	}
	v := o.value[k]
	switch {
	case o.defaults == rootDefaults && k == "metadata":
		md, isMap := v.(map[string]any)
		if !isMap {
			md = emptyMap
		}
		if prop, ok := o.schema.properties[k].(*cachedSchema); ok && isObject(prop) {
			return &objectVal{value: md, schema: prop, defaults: metadataDefaults}, true
		}
		v = md
	case o.defaults == metadataDefaults && (k == "labels" || k == "annotations"):
		if _, isMap := v.(map[string]any); !isMap {
			v = emptyMap
		}
	}
	if v == nil {
		// An absent field; a null field of an object with properties is
		// absent too.
		return nil, false
	}
	prop, ok := o.schema.properties[k]
	if !ok {
		return nil, false
	}
	return toVal(v, prop.(*cachedSchema)), true
}

func (o *objectVal) Get(key ref.Val) ref.Val {
	if v, found := o.Find(key); found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

func (o *objectVal) Contains(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

func (o *objectVal) Size() ref.Val { return types.Int(len(o.seen())) }

func (o *objectVal) Iterator() traits.Iterator { return o.library().(traits.Mapper).Iterator() }

func (o *objectVal) Equal(other ref.Val) ref.Val { return o.library().Equal(libraryOf(other)) }

func (o *objectVal) ConvertToNative(t reflect.Type) (any, error) {
	return o.library().ConvertToNative(t)
}

func (o *objectVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.MapType {
		return o
	}
	return o.library().ConvertToType(t)
}

func (o *objectVal) Type() ref.Type { return types.MapType }

func (o *objectVal) Value() any { return o.seen() }

// listVal is a list of objects with typed properties, as the API server
// library adapts it, whose elements are objectVals: read when an
// expression reaches them, not all at once when it iterates. Equality,
// membership, concatenation and conversions are the library's own.
type listVal struct {
	elements []any
	schema   *cachedSchema
	items    *cachedSchema
}

var _ traits.Lister = (*listVal)(nil)

// library is the API server library's adapter of the same list.
func (l *listVal) library() ref.Val { return common.UnstructuredToVal(l.elements, l.schema) }

func (l *listVal) Get(idx ref.Val) ref.Val {
	iv, isInt := idx.(types.Int)
	if !isInt {
		return types.ValOrErr(idx, "unsupported index: %v", idx)
	}
	i := int(iv)
	if i < 0 || i >= len(l.elements) {
		return types.NewErr("index out of bounds: %v", idx)
	}
	return toVal(l.elements[i], l.items)
}

func (l *listVal) Iterator() traits.Iterator { return &listIterator{list: l} }

func (l *listVal) Size() ref.Val { return types.Int(len(l.elements)) }

func (l *listVal) Contains(v ref.Val) ref.Val {
	return l.library().(traits.Lister).Contains(libraryOf(v))
}

func (l *listVal) Add(other ref.Val) ref.Val {
	return l.library().(traits.Lister).Add(libraryOf(other))
}

func (l *listVal) Equal(other ref.Val) ref.Val { return l.library().Equal(libraryOf(other)) }

func (l *listVal) ConvertToNative(t reflect.Type) (any, error) {
	return l.library().ConvertToNative(t)
}

func (l *listVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.ListType {
		return l
	}
	return l.library().ConvertToType(t)
}

func (l *listVal) Type() ref.Type { return types.ListType }

func (l *listVal) Value() any { return l.elements }

type listIterator struct {
	list *listVal
	next int
}

var _ traits.Iterator = (*listIterator)(nil)

func (it *listIterator) HasNext() ref.Val { return types.Bool(it.next < len(it.list.elements)) }

func (it *listIterator) Next() ref.Val {
	if it.next >= len(it.list.elements) {
		return types.NewErr("no more elements")
	}
	v := toVal(it.list.elements[it.next], it.list.items)
	it.next++
	return v
}

func (it *listIterator) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from iterator to '%v'", t)
}

func (it *listIterator) ConvertToType(t ref.Type) ref.Val {
	return types.NewErr("type conversion error from iterator to '%s'", t.TypeName())
}

func (it *listIterator) Equal(other ref.Val) ref.Val { return types.NoSuchOverloadErr() }

func (it *listIterator) Type() ref.Type { return types.IteratorType }

func (it *listIterator) Value() any { return nil }

// dynVal is the object of a variable without a schema (a manifest), or its
// metadata, read in place: the library's dynamic map of the object with the
// metadata maps it lacks (see withMetadataMaps), without copying the object
// and its metadata on every evaluation. A field reads as the dynamic map
// reads it; iteration, equality and conversions are the dynamic map's own.
type dynVal struct {
	value    map[string]any
	defaults defaults
}

var _ traits.Mapper = (*dynVal)(nil)

func (d *dynVal) seen() map[string]any { return seenWith(d.value, d.defaults) }

// library is the dynamic map of the object as the expression sees it.
func (d *dynVal) library() ref.Val { return types.DefaultTypeAdapter.NativeToValue(d.seen()) }

func (d *dynVal) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return d.library().(traits.Mapper).Find(key)
	}
	v, found := d.value[string(k)]
	switch {
	case d.defaults == rootDefaults && k == "metadata":
		md, isMap := v.(map[string]any)
		if !isMap {
			md = emptyMap
		}
		return &dynVal{value: md, defaults: metadataDefaults}, true
	case d.defaults == metadataDefaults && (k == "labels" || k == "annotations"):
		if _, isMap := v.(map[string]any); !isMap {
			v = emptyMap
		}
		found = true
	}
	if !found {
		return nil, false
	}
	return types.DefaultTypeAdapter.NativeToValue(v), true
}

func (d *dynVal) Get(key ref.Val) ref.Val {
	if _, ok := key.(types.String); !ok {
		return d.library().(traits.Mapper).Get(key)
	}
	if v, found := d.Find(key); found {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

func (d *dynVal) Contains(key ref.Val) ref.Val {
	if _, ok := key.(types.String); !ok {
		return d.library().(traits.Mapper).Contains(key)
	}
	_, found := d.Find(key)
	return types.Bool(found)
}

func (d *dynVal) Size() ref.Val { return types.Int(len(d.seen())) }

func (d *dynVal) Iterator() traits.Iterator { return d.library().(traits.Mapper).Iterator() }

func (d *dynVal) Equal(other ref.Val) ref.Val { return d.library().Equal(libraryOf(other)) }

func (d *dynVal) ConvertToNative(t reflect.Type) (any, error) {
	return d.library().ConvertToNative(t)
}

func (d *dynVal) ConvertToType(t ref.Type) ref.Val {
	if t == types.MapType {
		return d
	}
	return d.library().ConvertToType(t)
}

func (d *dynVal) Type() ref.Type { return types.MapType }

func (d *dynVal) Value() any { return d.seen() }
