package cel

import (
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
// properties are read by objectVal, whose field selection is the hot path
// of every expression; every other value is the API server library's
// adapter's, whose conversions objectVal also delegates to.
func toVal(v any, s *cachedSchema) ref.Val {
	if m, ok := v.(map[string]any); ok && s.typ == "object" && !s.intOrString && (s.embedded || s.properties != nil) {
		if s.embedded {
			s = s.WithTypeAndObjectMeta().(*cachedSchema)
		}
		return &objectVal{value: m, schema: s}
	}
	return common.UnstructuredToVal(v, s)
}

// objectVal is an object with typed properties, as the API server library
// adapts it, with a field selection that neither runs the unescaping
// pattern on plain field names nor allocates a look-up function per object.
// Iteration, equality and conversions are the library's own.
type objectVal struct {
	value  map[string]any
	schema *cachedSchema
}

var _ traits.Mapper = (*objectVal)(nil)

// library is the API server library's adapter of the same object.
func (o *objectVal) library() ref.Val { return common.UnstructuredToVal(o.value, o.schema) }

// libraryOf is v as the library's adapter sees it.
func libraryOf(v ref.Val) ref.Val {
	if o, ok := v.(*objectVal); ok {
		return o.library()
	}
	return v
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
	v, ok := o.value[k]
	if !ok || v == nil {
		// A null field of an object with properties is an absent one.
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

func (o *objectVal) Size() ref.Val { return types.Int(len(o.value)) }

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

func (o *objectVal) Value() any { return o.value }
