package decision

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// Place is where a stage outside the cluster namespace finds its objects:
// a resource in one namespace, or a cluster-scoped resource (Namespace "").
type Place struct {
	GVR       schema.GroupVersionResource
	Namespace string
}

func (p Place) String() string {
	if p.Namespace == "" {
		return ResourceName(p.GVR) + " (cluster-scoped)"
	}
	return ResourceName(p.GVR) + " in namespace " + p.Namespace
}

// Places are where the stage finds its objects outside the cluster
// namespace; none for a stage in it.
func (s Stage) Places() []Place {
	if s.ClusterScoped {
		return []Place{{GVR: s.GVR}}
	}
	out := make([]Place, len(s.Namespaces))
	for i, ns := range s.Namespaces {
		out[i] = Place{GVR: s.GVR, Namespace: ns}
	}
	return out
}

// Places lists every place outside the cluster namespace the policy's
// stages read, without duplicates.
func Places(p *cel.Policy) []Place {
	var out []Place
	for _, s := range Stages(p) {
		for _, pl := range s.Places() {
			if !slices.Contains(out, pl) {
				out = append(out, pl)
			}
		}
	}
	return out
}

// where says, for messages, where an outside stage reads; "" in the
// cluster namespace.
func (s Stage) where() string {
	switch {
	case s.ClusterScoped:
		return " (cluster-scoped)"
	case len(s.Namespaces) > 0:
		return fmt.Sprintf(" in namespace(s) %v", s.Namespaces)
	}
	return ""
}

// ReadResources lists every resource a cluster's cleanup reads, in the
// cluster namespace or at its stages' places, without duplicates.
func ReadResources(p *cel.Policy) []schema.GroupVersionResource {
	out := Resources(p)
	for _, pl := range Places(p) {
		if !slices.Contains(out, pl.GVR) {
			out = append(out, pl.GVR)
		}
	}
	return out
}
