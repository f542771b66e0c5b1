package review

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cleanupPolicyCRD is the CRD whose defaults the proposed policies get, as
// the API server gives them to a policy it stores.
const cleanupPolicyCRD = "cleanuppolicies.cleanup.fleetops.dev"

// defaulted returns the proposed policies with the defaults of the
// CleanupPolicy CRD the hub serves (none when the snapshot has no CRD).
func defaulted(ctx context.Context, r client.Reader, proposed []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.Get(ctx, client.ObjectKey{Name: cleanupPolicyCRD}, crd)
	if apierrors.IsNotFound(err) || errors.Is(err, errNotHeld) {
		// No CRD to read (a user who may not read CRDs): no defaults.
		return proposed, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(proposed))
	for i, p := range proposed {
		s, err := structuralOf(crd, p.GroupVersionKind().Version)
		if err != nil {
			return nil, err
		}
		out[i] = p.DeepCopy()
		if s != nil {
			defaulting.Default(out[i].Object, s)
		}
	}
	return out, nil
}

// structuralOf is the structural schema of a version of a CRD; nil when
// the CRD has no such version or no schema.
func structuralOf(crd *apiextensionsv1.CustomResourceDefinition, version string) (*structuralschema.Structural, error) {
	for _, v := range crd.Spec.Versions {
		if v.Name != version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, err
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			return nil, fmt.Errorf("the schema of %s %s: %w", crd.Name, version, err)
		}
		return s, nil
	}
	return nil, nil
}
