package cel

import (
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// cachedSchema adapts an OpenAPI schema for run-time values. The library's
// adaptor builds a new map of property adaptors on every field access; this
// one builds the tree once per environment, so evaluating `a.b.c` allocates
// nothing for the schema.
type cachedSchema struct {
	*openapi.Schema
	properties map[string]common.Schema
	items      common.Schema
	additional common.SchemaOrBool
}

func newCachedSchema(s *spec.Schema) *cachedSchema {
	c := &cachedSchema{Schema: &openapi.Schema{Schema: s}}
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
