// Package v1alpha1 holds the CleanupPolicy API, cleanup.fleetops.dev/v1alpha1.
// +kubebuilder:object:generate=true
// +groupName=cleanup.fleetops.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the CleanupPolicy API.
	GroupVersion = schema.GroupVersion{Group: "cleanup.fleetops.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
