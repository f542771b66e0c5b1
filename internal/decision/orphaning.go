package decision

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// Orphan is one manifest to leave on the managed cluster: an orphaning rule
// of OCM's ManifestWork API.
type Orphan struct {
	Group, Resource, Namespace, Name string
}

// DeleteOption is the decision for one ManifestWork.
type DeleteOption struct {
	// PropagationPolicy is "", Orphan or SelectivelyOrphan. "" means the
	// operator owns no deleteOption: the work's default applies.
	PropagationPolicy string
	// Orphans are the manifests to keep, for SelectivelyOrphan, in manifest order.
	Orphans []Orphan
	// Rules names, per orphaned manifest, the rule that matched it.
	Rules []string
}

// Equal reports whether two decisions stamp the same deleteOption.
func (d DeleteOption) Equal(o DeleteOption) bool {
	if d.PropagationPolicy != o.PropagationPolicy || len(d.Orphans) != len(o.Orphans) {
		return false
	}
	for i := range d.Orphans {
		if d.Orphans[i] != o.Orphans[i] {
			return false
		}
	}
	return true
}

// ResourceOf names the resource of a manifest's kind: from the work agent's
// status when it reported it, else from the API server's REST mapping.
type ResourceOf func(index int, gvk schema.GroupVersionKind) (resource string, err error)

// Orphaning decides a work's deleteOption: each manifest is orphaned when any
// rule is true for it; all orphaned gives Orphan, some SelectivelyOrphan,
// none nothing. A rule that fails, or a kind whose resource is unknown, fails
// the whole decision: the work is not stamped on a guess.
func Orphaning(p *cel.Policy, a *cel.Activation, work map[string]any, manifests []map[string]any, resourceOf ResourceOf) (DeleteOption, error) {
	var d DeleteOption
	if len(p.Orphaning) == 0 || len(manifests) == 0 {
		return d, nil
	}
	wa := a.With(cel.VarWork, work)
	for i, m := range manifests {
		rule := ""
		for j, expr := range p.Orphaning {
			ok, err := expr.Bool(wa.With(cel.VarManifest, m))
			if err != nil {
				return DeleteOption{}, fmt.Errorf("manifest %d: %w", i, err)
			}
			if ok {
				rule = p.Spec.Orphaning[j].Name
				break
			}
		}
		if rule == "" {
			continue
		}
		gvk, name, namespace := manifestIdentity(m)
		resource, err := resourceOf(i, gvk)
		if err != nil {
			return DeleteOption{}, fmt.Errorf("manifest %d (%s %s), orphaned by rule %s: %w", i, gvk.Kind, name, rule, err)
		}
		d.Orphans = append(d.Orphans, Orphan{Group: gvk.Group, Resource: resource, Namespace: namespace, Name: name})
		d.Rules = append(d.Rules, rule)
	}
	switch len(d.Orphans) {
	case 0:
	case len(manifests):
		d.PropagationPolicy = "Orphan"
		d.Orphans = nil
	default:
		d.PropagationPolicy = "SelectivelyOrphan"
	}
	return d, nil
}

func manifestIdentity(m map[string]any) (gvk schema.GroupVersionKind, name, namespace string) {
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	gv, _ := schema.ParseGroupVersion(apiVersion)
	md, _ := m["metadata"].(map[string]any)
	name, _ = md["name"].(string)
	namespace, _ = md["namespace"].(string)
	return gv.WithKind(kind), name, namespace
}

// SignalRole is what a ManifestWork is to the deletion signal.
type SignalRole int

const (
	// NotSignal is any work but the operator's signal works.
	NotSignal SignalRole = iota
	// CurrentSignal is the operator's signal work the policy keeps: its
	// deletion is the signal.
	CurrentSignal
	// RetiredSignal is an operator's signal work the policy no longer keeps:
	// its deletion must not signal.
	RetiredSignal
)

// TeardownOrphaning is the deleteOption a teardown requires of a work, and
// the work agent must have applied, before the work is deleted: Orphan for
// every work under Needless, whatever the orphaning rules say (rules is not
// called); nothing for the current signal work and Orphan for a retired
// one; otherwise what the rules decide. The operator and the preview both
// decide through it.
func TeardownOrphaning(strategy v1alpha1.RemoveStrategyType, role SignalRole, rules func() (DeleteOption, error)) (DeleteOption, error) {
	switch {
	case strategy == v1alpha1.RemoveStrategyNeedless, role == RetiredSignal:
		return DeleteOption{PropagationPolicy: "Orphan"}, nil
	case role == CurrentSignal:
		return DeleteOption{}, nil
	}
	return rules()
}

// AddonOf names the add-on whose manager made a ManifestWork (the label
// OCM's add-on framework puts on the works it makes), or "".
func AddonOf(w metav1.Object) string {
	return w.GetLabels()[addonv1alpha1.AddonLabelKey]
}

// AddonUnreachable says why a teardown cannot give an add-on's work the
// deleteOption its policy requires: the add-on manager re-applies its
// works, so the operator does not write their deleteOption (a write war
// it would lose), and says how to keep the manifests instead.
func AddonUnreachable(key, addon string, have, want DeleteOption) string {
	return fmt.Sprintf("%s belongs to add-on %s, whose manager re-applies it, so the operator does not write its spec.deleteOption: "+
		"the policy requires %s, the work has %s; to keep those manifests on the managed cluster, annotate each %s in the add-on's manifests "+
		"(its AddOnTemplate or agent add-on), which the add-on framework honours when it builds the work, or delete the cluster with a policy whose rules do not orphan them",
		key, addon, want.Describe(), have.Describe(), addonv1alpha1.DeletionOrphanAnnotationKey)
}
