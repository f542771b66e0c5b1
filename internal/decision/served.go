package decision

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// A monitored resource or a stage that names a resource the API server does
// not serve (a typo in its group, version or resource, or a CRD not
// installed yet) cannot be listed: taking it for empty would open the gate,
// or skip the stage, and delete the namespace while objects of the intended
// resource remain. A teardown holds at that step until it is served.

// UnservedField is a field of a policy naming a resource not served.
type UnservedField struct {
	Path string
	GVR  schema.GroupVersionResource
}

func (f UnservedField) String() string {
	return fmt.Sprintf("%s: resource %s/%s is not served by the API server", f.Path, ResourceName(f.GVR), f.GVR.Version)
}

// MonitoredFields are the policy's monitored resources with their paths.
func MonitoredFields(spec *v1alpha1.CleanupPolicySpec) []UnservedField {
	out := make([]UnservedField, len(spec.MonitoredResources))
	for i, m := range spec.MonitoredResources {
		out[i] = UnservedField{Path: fmt.Sprintf("spec.monitoredResources[%d]", i), GVR: gvr(m.GroupVersionResource)}
	}
	return out
}

// StageFields are the policy's declared stages with their paths.
func StageFields(spec *v1alpha1.CleanupPolicySpec) []UnservedField {
	out := make([]UnservedField, len(spec.DeletionStages))
	for i, s := range spec.DeletionStages {
		out[i] = UnservedField{Path: fmt.Sprintf("spec.deletionStages[%d]", i), GVR: gvr(s.GroupVersionResource)}
	}
	return out
}

// UnservedFields returns the policy's monitored resources and stages that
// the API server does not serve, with their field paths. served says
// whether the API server serves a resource.
func UnservedFields(spec *v1alpha1.CleanupPolicySpec, served func(schema.GroupVersionResource) (bool, error)) ([]UnservedField, error) {
	var out []UnservedField
	for _, f := range append(MonitoredFields(spec), StageFields(spec)...) {
		ok, err := served(f.GVR)
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, f)
		}
	}
	return out, nil
}
