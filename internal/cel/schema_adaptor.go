package cel

import (
	"sync"

	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// cachedSchema adapts an OpenAPI schema for run-time values. The library's
// adaptor builds a new map of property adaptors on every field access and
// looks the Kubernetes extensions up, case-insensitively, on every value it
// converts; this one builds the tree and reads the extensions once per
// environment, so evaluating `a.b.c` allocates nothing for the schema.
type cachedSchema struct {
	*openapi.Schema
	properties map[string]common.Schema
	items      common.Schema
	additional common.SchemaOrBool

	typ, format, listType                  string
	intOrString, embedded, preserveUnknown bool
	listMapKeys                            []string

	// withMeta is the schema of an embedded resource with its apiVersion,
	// kind and metadata typed, built on first use.
	withMetaOnce sync.Once
	withMeta     common.Schema
}

func newCachedSchema(s *spec.Schema) *cachedSchema {
	os := &openapi.Schema{Schema: s}
	c := &cachedSchema{
		Schema:          os,
		typ:             os.Type(),
		format:          os.Format(),
		listType:        os.XListType(),
		intOrString:     os.IsXIntOrString(),
		embedded:        os.IsXEmbeddedResource(),
		preserveUnknown: os.IsXPreserveUnknownFields(),
		listMapKeys:     os.XListMapKeys(),
	}
	if s.Properties != nil {
		c.properties = make(map[string]common.Schema, len(s.Properties))
		for name := range s.Properties {
			prop := s.Properties[name]
			c.properties[name] = newCachedSchema(&prop)
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		c.items = newCachedSchema(s.Items.Schema)
	}
	if ap := s.AdditionalProperties; ap != nil {
		sob := &cachedSchemaOrBool{allows: ap.Allows}
		if ap.Schema != nil {
			sob.schema = newCachedSchema(ap.Schema)
		}
		c.additional = sob
	}
	return c
}

func (c *cachedSchema) Type() string                   { return c.typ }
func (c *cachedSchema) Format() string                 { return c.format }
func (c *cachedSchema) IsXIntOrString() bool           { return c.intOrString }
func (c *cachedSchema) IsXEmbeddedResource() bool      { return c.embedded }
func (c *cachedSchema) IsXPreserveUnknownFields() bool { return c.preserveUnknown }
func (c *cachedSchema) XListType() string              { return c.listType }
func (c *cachedSchema) XListMapKeys() []string         { return c.listMapKeys }

func (c *cachedSchema) Properties() map[string]common.Schema { return c.properties }

func (c *cachedSchema) Items() common.Schema {
	if c.items == nil {
		return nil
	}
	return c.items
}

func (c *cachedSchema) AdditionalProperties() common.SchemaOrBool {
	if c.additional == nil {
		return nil
	}
	return c.additional
}

// WithTypeAndObjectMeta is the schema of an embedded resource with its
// apiVersion, kind and metadata typed: built once, not per value.
func (c *cachedSchema) WithTypeAndObjectMeta() common.Schema {
	c.withMetaOnce.Do(func() {
		c.withMeta = newCachedSchema(common.WithTypeAndObjectMeta(c.Schema.Schema))
	})
	return c.withMeta
}

type cachedSchemaOrBool struct {
	schema *cachedSchema
	allows bool
}

func (s *cachedSchemaOrBool) Schema() common.Schema {
	if s.schema == nil {
		return nil
	}
	return s.schema
}

func (s *cachedSchemaOrBool) Allows() bool { return s.allows }
