package decision

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

var runtimeConverter = runtime.DefaultUnstructuredConverter

// MaxReapplies is how many times the operator re-applies a decision that
// another manager reverts before it stops writing that object.
const MaxReapplies = 3

// ManagedByOperator says whether the object carries the operator's
// managed-by label: the operator created it and may change or delete it.
func ManagedByOperator(o metav1.Object) bool {
	return o.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedBy
}

// NotOwnedMessage says why the operator leaves an object alone.
func NotOwnedMessage(kind, namespace, name string, o metav1.Object) string {
	who := "no " + v1alpha1.ManagedByLabel + " label"
	if v, ok := o.GetLabels()[v1alpha1.ManagedByLabel]; ok {
		who = fmt.Sprintf("%s is %q", v1alpha1.ManagedByLabel, v)
	}
	return fmt.Sprintf("%s %s/%s was not created by the operator (%s): it is neither changed nor deleted", kind, namespace, name, who)
}

// WorkOrphaning evaluates the policy's orphaning rules on a work's
// manifests. A manifest's resource is the one the work agent reported,
// else the one resourceOf (the API server's REST mapping) names. A policy
// without rules orphans nothing, and reads no work.
func WorkOrphaning(p *cel.Policy, a *cel.Activation, w *workv1.ManifestWork, resourceOf func(schema.GroupVersionKind) (string, error)) (DeleteOption, error) {
	if len(p.Orphaning) == 0 {
		return DeleteOption{}, nil
	}
	// The cache keeps manifests as raw JSON; they become maps only here,
	// where rules read them.
	manifests := make([]map[string]any, 0, len(w.Spec.Workload.Manifests))
	for i, m := range w.Spec.Workload.Manifests {
		var obj map[string]any
		if err := json.Unmarshal(m.Raw, &obj); err != nil || obj == nil {
			return DeleteOption{}, fmt.Errorf("manifest %d is not an object", i)
		}
		manifests = append(manifests, obj)
	}
	work, err := workValue(p, w)
	if err != nil {
		return DeleteOption{}, err
	}
	reported := map[int]workv1.ManifestResourceMeta{}
	for _, m := range w.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Resource != "" {
			reported[int(m.ResourceMeta.Ordinal)] = m.ResourceMeta
		}
	}
	return Orphaning(p, a, work, manifests, func(i int, gvk schema.GroupVersionKind) (string, error) {
		if r, ok := reported[i]; ok && r.Group == gvk.Group && r.Version == gvk.Version && r.Kind == gvk.Kind {
			return r.Resource, nil
		}
		if resourceOf == nil {
			return "", fmt.Errorf("neither the work agent nor the API server knows its resource")
		}
		resource, err := resourceOf(gvk)
		if err != nil {
			return "", fmt.Errorf("neither the work agent nor the API server knows its resource: %w", err)
		}
		return resource, nil
	})
}

// workValue is the work as the orphaning rules read it: only its type and
// metadata when no rule reads anything else of it (most rules read its
// labels), else all of it. The rules cannot tell the two apart, and the
// work's spec, with every manifest, is not converted for each decision.
func workValue(p *cel.Policy, w *workv1.ManifestWork) (map[string]any, error) {
	metadataOnly := true
	for _, expr := range p.Orphaning {
		if !expr.ReadsOnly(cel.VarWork, "apiVersion", "kind", "metadata") {
			metadataOnly = false
			break
		}
	}
	var work map[string]any
	if metadataOnly {
		md, err := runtimeConverter.ToUnstructured(&w.ObjectMeta)
		if err != nil {
			return nil, err
		}
		work = map[string]any{"metadata": md}
	} else {
		var err error
		if work, err = runtimeConverter.ToUnstructured(w); err != nil {
			return nil, err
		}
	}
	work["apiVersion"], work["kind"] = workv1.GroupVersion.String(), "ManifestWork"
	return work, nil
}

// CurrentDeleteOption reads the deleteOption a work carries.
func CurrentDeleteOption(w *workv1.ManifestWork) DeleteOption {
	var d DeleteOption
	if w.Spec.DeleteOption == nil {
		return d
	}
	d.PropagationPolicy = string(w.Spec.DeleteOption.PropagationPolicy)
	if d.PropagationPolicy == string(workv1.DeletePropagationPolicyTypeForeground) {
		d.PropagationPolicy = ""
	}
	if so := w.Spec.DeleteOption.SelectivelyOrphan; so != nil {
		for _, r := range so.OrphaningRules {
			d.Orphans = append(d.Orphans, Orphan{Group: r.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name})
		}
	}
	return d
}

// KeepsAtLeast says whether a work carrying have leaves on the managed
// cluster everything want would leave: Orphan keeps everything.
func KeepsAtLeast(have, want DeleteOption) bool {
	return want.PropagationPolicy == "" || have.PropagationPolicy == string(workv1.DeletePropagationPolicyTypeOrphan) || have.Equal(want)
}

// OrphanApplied says whether the work agent has applied the work's current
// generation, at least the one stamped (0: none remembered): its Applied
// condition observed it. Deleting a work with an orphaning deleteOption is
// safe only then. Applied=False means some manifest failed to apply: the
// agent still owns it and would delete it with the work.
func OrphanApplied(w *workv1.ManifestWork, stamped int64) bool {
	if w.Generation < stamped {
		return false
	}
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return applied != nil && applied.Status == metav1.ConditionTrue && applied.ObservedGeneration >= w.Generation
}

// SignalRoleOf is what a work is to the deletion signal of the policy.
func SignalRoleOf(p *cel.Policy, w metav1.Object) SignalRole {
	if !IsSignalWork(w) {
		return NotSignal
	}
	if w.GetName() == SignalWorkName(p) {
		return CurrentSignal
	}
	return RetiredSignal
}
