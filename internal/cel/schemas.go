package cel

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// CRD names and served versions whose schemas type the CEL variables.
const (
	ManagedClusterCRD      = "managedclusters.cluster.open-cluster-management.io"
	ManifestWorkCRD        = "manifestworks.work.open-cluster-management.io"
	ConfigurationPolicyCRD = "configurationpolicies.policy.open-cluster-management.io"
)

// Schemas are the OpenAPI schemas that type the CEL variables. A nil schema
// leaves its variable dynamic: expressions over it are then checked at run
// time only.
type Schemas struct {
	ManagedCluster      *spec.Schema
	ManifestWork        *spec.Schema
	ConfigurationPolicy *spec.Schema
}

// SchemasFromCRDs picks the schemas of the v1 versions of the ManagedCluster,
// ManifestWork and ConfigurationPolicy CRDs among crds. Missing CRDs leave
// their schema nil.
func SchemasFromCRDs(crds []apiextensionsv1.CustomResourceDefinition) (Schemas, error) {
	var s Schemas
	for i := range crds {
		crd := &crds[i]
		var target **spec.Schema
		switch crd.Name {
		case ManagedClusterCRD:
			target = &s.ManagedCluster
		case ManifestWorkCRD:
			target = &s.ManifestWork
		case ConfigurationPolicyCRD:
			target = &s.ConfigurationPolicy
		default:
			continue
		}
		schema, err := crdVersionSchema(crd, "v1")
		if err != nil {
			return Schemas{}, err
		}
		*target = schema
	}
	return s, nil
}

func crdVersionSchema(crd *apiextensionsv1.CustomResourceDefinition, version string) (*spec.Schema, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name != version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		// JSONSchemaProps and the OpenAPI schema share one JSON form,
		// x-kubernetes extensions included.
		raw, err := json.Marshal(v.Schema.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		s := &spec.Schema{}
		if err := json.Unmarshal(raw, s); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("CRD %s serves no version %s with a schema", crd.Name, version)
}

// withObjectMeta returns a copy of s whose apiVersion, kind and metadata are
// typed in full. CRD schemas leave metadata untyped, and the API server's own
// CEL exposes only metadata.name there; the operator reads labels,
// annotations, finalizers and the rest, so expressions may too.
func withObjectMeta(s *spec.Schema) *spec.Schema {
	out := *s
	out.Type = spec.StringOrArray{"object"}
	out.Properties = make(map[string]spec.Schema, len(s.Properties)+3)
	for k, v := range s.Properties {
		out.Properties[k] = v
	}
	out.Properties["apiVersion"] = *spec.StringProperty()
	out.Properties["kind"] = *spec.StringProperty()
	out.Properties["metadata"] = objectMetaSchema()
	return &out
}

// metadataOnlySchema types an object of which only apiVersion, kind and
// metadata are known: the objects the operator watches metadata-only.
func metadataOnlySchema() *spec.Schema {
	return withObjectMeta(&spec.Schema{})
}

// namespaceSchema types the cluster namespace.
func namespaceSchema() *spec.Schema {
	return withObjectMeta(&spec.Schema{SchemaProps: spec.SchemaProps{Properties: map[string]spec.Schema{
		"spec": object(map[string]spec.Schema{"finalizers": *stringList()}),
		"status": object(map[string]spec.Schema{
			"phase": *spec.StringProperty(),
		}),
	}}})
}

func objectMetaSchema() spec.Schema {
	ownerRef := object(map[string]spec.Schema{
		"apiVersion":         *spec.StringProperty(),
		"kind":               *spec.StringProperty(),
		"name":               *spec.StringProperty(),
		"uid":                *spec.StringProperty(),
		"controller":         *spec.BoolProperty(),
		"blockOwnerDeletion": *spec.BoolProperty(),
	})
	return object(map[string]spec.Schema{
		"name":                       *spec.StringProperty(),
		"generateName":               *spec.StringProperty(),
		"namespace":                  *spec.StringProperty(),
		"uid":                        *spec.StringProperty(),
		"resourceVersion":            *spec.StringProperty(),
		"generation":                 *spec.Int64Property(),
		"creationTimestamp":          *spec.DateTimeProperty(),
		"deletionTimestamp":          *spec.DateTimeProperty(),
		"deletionGracePeriodSeconds": *spec.Int64Property(),
		"labels":                     *stringMap(),
		"annotations":                *stringMap(),
		"finalizers":                 *stringList(),
		"ownerReferences":            {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"array"}, Items: &spec.SchemaOrArray{Schema: &ownerRef}}},
	})
}

func object(props map[string]spec.Schema) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: props}}
}

func stringMap() *spec.Schema {
	return spec.MapProperty(spec.StringProperty())
}

func stringList() *spec.Schema {
	return spec.ArrayProperty(spec.StringProperty())
}
