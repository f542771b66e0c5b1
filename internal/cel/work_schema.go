package cel

import (
	"maps"
	"slices"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// UncachedManifestFields are the fields of each entry of a ManifestWork's
// status.resourceStatus.manifests that the operator does not cache
// (internal/operator drops them): the work agent's conditions and status
// feedback per manifest, most of a work's status, which no decision reads.
// Only resourceMeta stays, which names each manifest's resource. `work` is
// typed without them, so that a rule reading them is refused when the policy
// is admitted, rather than evaluated on a field that is never there.
var UncachedManifestFields = []string{"conditions", "statusFeedback"}

// cachedWorkSchema returns a copy of the ManifestWork schema without
// UncachedManifestFields; s is not changed. A schema without that path is
// returned as it is.
func cachedWorkSchema(s *spec.Schema) *spec.Schema {
	status, ok := s.Properties["status"]
	if !ok {
		return s
	}
	resourceStatus, ok := status.Properties["resourceStatus"]
	if !ok {
		return s
	}
	manifests, ok := resourceStatus.Properties["manifests"]
	if !ok || manifests.Items == nil || manifests.Items.Schema == nil {
		return s
	}
	item := *manifests.Items.Schema
	item.Properties = maps.Clone(item.Properties)
	for _, f := range UncachedManifestFields {
		delete(item.Properties, f)
	}
	item.Required = slices.DeleteFunc(slices.Clone(item.Required), func(f string) bool { return slices.Contains(UncachedManifestFields, f) })
	manifests.Items = &spec.SchemaOrArray{Schema: &item}
	resourceStatus.Properties = maps.Clone(resourceStatus.Properties)
	resourceStatus.Properties["manifests"] = manifests
	status.Properties = maps.Clone(status.Properties)
	status.Properties["resourceStatus"] = resourceStatus
	out := *s
	out.Properties = maps.Clone(s.Properties)
	out.Properties["status"] = status
	return &out
}
