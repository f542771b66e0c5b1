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
//
// A cluster-scoped resource has no objects in the cluster namespace: a live
// list drops the namespace (every object of the hub), the operator's cache
// finds none. Neither is what the policy asked for, so it is refused the
// same way: the policy is not Ready, and a teardown holds at that step.

// Scope is how the API server serves a resource.
type Scope int

const (
	// NotServed: the API server does not serve the resource.
	NotServed Scope = iota
	// ClusterScoped: served, but its objects are in no namespace.
	ClusterScoped
	// Namespaced: served, with objects in namespaces.
	Namespaced
)

// UnservedField is a field of a policy naming a resource not served as it
// declares: not served at all, cluster-scoped where it reads a namespace,
// or namespaced for a stage declared clusterScoped.
type UnservedField struct {
	Path          string
	GVR           schema.GroupVersionResource
	ClusterScoped bool
	// WantClusterScoped says the field is a stage declared clusterScoped:
	// its resource must be served cluster-scoped.
	WantClusterScoped bool
	// Namespaced says the API server serves the resource namespaced.
	Namespaced bool
}

func (f UnservedField) String() string {
	if f.WantClusterScoped && f.Namespaced {
		return fmt.Sprintf("%s: resource %s/%s is namespaced; a clusterScoped stage deletes cluster-scoped objects only (name its namespaces instead)",
			f.Path, ResourceName(f.GVR), f.GVR.Version)
	}
	if f.ClusterScoped {
		return fmt.Sprintf("%s: resource %s/%s is cluster-scoped; only namespaced resources, read in the cluster namespace, can be monitored or deleted",
			f.Path, ResourceName(f.GVR), f.GVR.Version)
	}
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
		out[i] = UnservedField{Path: fmt.Sprintf("spec.deletionStages[%d]", i), GVR: gvr(s.GroupVersionResource),
			WantClusterScoped: s.ClusterScoped}
	}
	return out
}

// UnservedFields returns the policy's monitored resources and stages that
// the API server does not serve in the cluster namespace (not served, or
// cluster-scoped), with their field paths. scope says how the API server
// serves a resource.
func UnservedFields(spec *v1alpha1.CleanupPolicySpec, scope func(schema.GroupVersionResource) (Scope, error)) ([]UnservedField, error) {
	var out []UnservedField
	for _, f := range append(MonitoredFields(spec), StageFields(spec)...) {
		sc, err := scope(f.GVR)
		if err != nil {
			return nil, err
		}
		if f.Mismatched(sc) {
			f.ClusterScoped, f.Namespaced = sc == ClusterScoped, sc == Namespaced
			out = append(out, f)
		}
	}
	return out, nil
}

// Mismatched says whether a resource served as sc cannot be read where the
// field reads it.
func (f UnservedField) Mismatched(sc Scope) bool {
	if f.WantClusterScoped {
		return sc != ClusterScoped
	}
	return sc != Namespaced
}
