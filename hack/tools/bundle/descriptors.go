package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// checkDescriptors fails when a spec or status descriptor of d names a
// field that the CRD version's schema does not have, so that a renamed or
// removed API field cannot leave a dangling descriptor behind.
func checkDescriptors(d v1alpha1.CRDDescription, v apiextensionsv1.CustomResourceDefinitionVersion) error {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return fmt.Errorf("CRD %s version %s has no schema to check descriptors against", d.Name, v.Name)
	}
	root := v.Schema.OpenAPIV3Schema
	var errs []error
	check := func(top string, path string) {
		if path == "" {
			errs = append(errs, fmt.Errorf("%s: a %s descriptor has an empty path", d.Name, top))
			return
		}
		if _, err := schemaAt(root, top+"."+path); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %s descriptor %q: %w", d.Name, d.Version, top, path, err))
		}
	}
	for _, s := range d.SpecDescriptors {
		check("spec", s.Path)
	}
	for _, s := range d.StatusDescriptors {
		check("status", s.Path)
	}
	return errors.Join(errs...)
}

// segment is one step of a descriptor path: a field name followed by any
// number of list indices, as in `rules[0]`.
var segment = regexp.MustCompile(`^([^\[\]]+)((?:\[\d+\])*)$`)

// schemaAt walks a descriptor path (dot-separated fields, `[n]` for an item
// of a list) through a schema. A field under an object that preserves
// unknown fields is accepted as it is.
func schemaAt(s *apiextensionsv1.JSONSchemaProps, path string) (*apiextensionsv1.JSONSchemaProps, error) {
	walked := ""
	for _, part := range strings.Split(path, ".") {
		m := segment.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("%q is not a field name with optional [n] indices", part)
		}
		if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && len(s.Properties) == 0 {
			return s, nil
		}
		next, ok := s.Properties[m[1]]
		if !ok {
			return nil, fmt.Errorf("the schema has no field %s", strings.TrimPrefix(walked+"."+m[1], "."))
		}
		walked = strings.TrimPrefix(walked+"."+m[1], ".")
		s = &next
		for range strings.Count(m[2], "[") {
			if s.Items == nil || s.Items.Schema == nil {
				return nil, fmt.Errorf("%s is not a list", walked)
			}
			s = s.Items.Schema
			walked += "[]"
		}
	}
	return s, nil
}
