package decision

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// Well-known resources of a cluster namespace.
var (
	ManagedClusterAddOns = schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	ManifestWorks        = schema.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
)

// DefaultTimeout applies when a policy sets no removeStrategy.timeout.
const DefaultTimeout = 30 * time.Minute

// Stage is one step of a cluster's cleanup: the objects of one resource,
// optionally filtered.
type Stage struct {
	Name string
	GVR  schema.GroupVersionResource
	When *cel.Expression // nil: every object not taken by an earlier stage
	// Namespaces are where the stage finds its objects outside the
	// cluster namespace; ClusterScoped says its resource is
	// cluster-scoped. Neither: the cluster namespace.
	Namespaces    []string
	ClusterScoped bool
}

// Outside says whether the stage finds its objects outside the cluster
// namespace.
func (s Stage) Outside() bool { return len(s.Namespaces) > 0 || s.ClusterScoped }

// Stages returns the policy's stages, or the default ones: add-ons, then
// ManifestWorks.
func Stages(p *cel.Policy) []Stage {
	if len(p.Spec.DeletionStages) == 0 {
		return []Stage{
			{Name: "addons", GVR: ManagedClusterAddOns},
			{Name: "manifestworks", GVR: ManifestWorks},
		}
	}
	out := make([]Stage, len(p.Spec.DeletionStages))
	for i, s := range p.Spec.DeletionStages {
		out[i] = Stage{Name: s.Name, GVR: gvr(s.GroupVersionResource), When: p.StageWhen[i],
			Namespaces: s.Namespaces, ClusterScoped: s.ClusterScoped}
	}
	return out
}

// Monitored is one monitored resource of a policy.
type Monitored struct {
	GVR  schema.GroupVersionResource
	When *cel.Expression
}

// MonitoredResources returns the resources that gate a cluster's cleanup.
func MonitoredResources(p *cel.Policy) []Monitored {
	out := make([]Monitored, len(p.Spec.MonitoredResources))
	for i, m := range p.Spec.MonitoredResources {
		out[i] = Monitored{GVR: gvr(m.GroupVersionResource), When: p.MonitoredWhen[i]}
	}
	return out
}

// Resources lists every resource a cluster's cleanup reads in the cluster
// namespace: monitored ones and stages, without duplicates. Stages outside
// it are read at their Places.
func Resources(p *cel.Policy) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	add := func(g schema.GroupVersionResource) {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	for _, m := range MonitoredResources(p) {
		add(m.GVR)
	}
	for _, s := range Stages(p) {
		if !s.Outside() {
			add(s.GVR)
		}
	}
	return out
}

func gvr(g v1alpha1.GroupVersionResource) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: g.Group, Version: g.Version, Resource: g.Resource}
}

// Strategy is the remove strategy for the cluster bound in a: the first rule
// whose `when` is true, else the default.
func Strategy(p *cel.Policy, a *cel.Activation) (v1alpha1.RemoveStrategyType, error) {
	for i, rule := range p.Spec.RemoveStrategy.Rules {
		ok, err := p.StrategyRules[i].Bool(a)
		if err != nil {
			return "", err
		}
		if ok {
			return rule.Strategy, nil
		}
	}
	return p.Spec.RemoveStrategy.Default, nil
}

// Timeout is how long a cleanup may take before the strategy's timeout rules apply.
func Timeout(p *cel.Policy) time.Duration {
	if t := p.Spec.RemoveStrategy.Timeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return DefaultTimeout
}

// SignalWorkName is the name of the deletion-signal ManifestWork, or "" when
// the policy declares no signal.
func SignalWorkName(p *cel.Policy) string {
	if p.Spec.DeletionSignal == nil {
		return ""
	}
	if p.Spec.DeletionSignal.WorkName == "" {
		return "cleanup-signal"
	}
	return p.Spec.DeletionSignal.WorkName
}

// KeepNamespace says whether the cluster namespace stays after the cleanup.
func KeepNamespace(p *cel.Policy, a *cel.Activation, namespace map[string]any) (bool, error) {
	if p.KeepNamespace == nil {
		return false, nil
	}
	return p.KeepNamespace.Bool(a.With(cel.VarNamespace, namespace))
}

// Object is what the decisions need of an object in the cluster namespace:
// its metadata, as the operator's metadata-only watches see it.
type Object struct {
	GVR  schema.GroupVersionResource
	Meta *metav1.PartialObjectMetadata
	// Value is the metadata as CEL sees it, as `object`; nil: made from
	// Meta when a filter reads it (most policies have none).
	Value map[string]any
	// Outside says the object was read outside the cluster namespace, for
	// a stage that names namespaces or is clusterScoped.
	Outside bool
}

// CELValue is the object as a `when` filter reads it.
func (o Object) CELValue() (map[string]any, error) {
	if o.Value != nil {
		return o.Value, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(o.Meta)
}

// Key names an object for messages: resource/name, or
// resource/namespace/name outside the cluster namespace.
func (o Object) Key() string {
	if o.Outside && o.Meta.Namespace != "" {
		return o.GVR.Resource + "/" + o.Meta.Namespace + "/" + o.Meta.Name
	}
	return o.GVR.Resource + "/" + o.Meta.Name
}

// Gate returns the monitored objects that hold the cleanup.
func Gate(p *cel.Policy, a *cel.Activation, byGVR map[schema.GroupVersionResource][]Object) ([]Object, error) {
	var holding []Object
	for _, m := range MonitoredResources(p) {
		for _, o := range byGVR[m.GVR] {
			ok := true
			if m.When != nil {
				value, err := o.CELValue()
				if err != nil {
					return nil, err
				}
				if ok, err = m.When.Bool(a.With(cel.VarObject, value)); err != nil {
					return nil, err
				}
			}
			if ok {
				holding = append(holding, o)
			}
		}
	}
	return holding, nil
}

// AssignStages sorts the objects into the stages: each object belongs to the
// first stage of its resource whose filter is true. A stage in the cluster
// namespace reads byGVR, one outside it the objects of its Places in
// outside. Objects named in skip (the deletion-signal work) belong to none.
// Within a stage, objects are in deletion order (see DeletionOrder).
func AssignStages(p *cel.Policy, a *cel.Activation, stages []Stage, byGVR map[schema.GroupVersionResource][]Object,
	outside map[Place][]Object, skip func(Object) bool) ([][]Object, error) {
	out := make([][]Object, len(stages))
	taken := map[*metav1.PartialObjectMetadata]bool{}
	for i, s := range stages {
		objs := byGVR[s.GVR]
		if s.Outside() {
			objs = nil
			for _, pl := range s.Places() {
				objs = append(objs, outside[pl]...)
			}
		}
		for _, o := range objs {
			if taken[o.Meta] || (skip != nil && skip(o)) {
				continue
			}
			ok := true
			if s.When != nil {
				value, err := o.CELValue()
				if err != nil {
					return nil, err
				}
				if ok, err = s.When.Bool(a.With(cel.VarObject, value)); err != nil {
					return nil, err
				}
			}
			if ok {
				taken[o.Meta] = true
				out[i] = append(out[i], o)
			}
		}
		slices.SortStableFunc(out[i], func(x, y Object) int {
			if c := cmp.Compare(DeletionOrder(x.Meta), DeletionOrder(y.Meta)); c != 0 {
				return c
			}
			return cmp.Compare(x.Meta.Name, y.Meta.Name)
		})
	}
	return out, nil
}

// DeletionOrder ranks an object by OCM's cleanup-priority annotation, as OCM
// defines it: objects without the annotation first (-2), then those with a
// value outside 0..100 (-1), then by value, lowest first.
func DeletionOrder(o metav1.Object) int {
	v, ok := o.GetAnnotations()[clusterv1.CleanupPriorityAnnotationKey]
	if !ok {
		return -2
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 100 {
		return -1
	}
	return n
}

// FirstGroup returns the leading objects of a stage that share the lowest
// deletion order: they are deleted together, and the next group waits until
// they are gone.
func FirstGroup(stage []Object) []Object {
	if len(stage) == 0 {
		return nil
	}
	first := DeletionOrder(stage[0].Meta)
	n := 1
	for n < len(stage) && DeletionOrder(stage[n].Meta) == first {
		n++
	}
	return stage[:n]
}

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
