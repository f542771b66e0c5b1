package decision

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// MinCollection is the fewest objects a group deleted in one
// deletecollection holds: below it, one delete per object costs as much.
const MinCollection = 2

// MaxLeftOut is the most objects a deletecollection leaves out by name
// (one field selector term each): past it, the group goes one by one.
const MaxLeftOut = 256

// ImmutableFields are the fields of an object that no write changes: a
// stage's when that reads no other field of the object decides the same
// for an object whatever is written to it.
var ImmutableFields = [][]string{{"metadata", "name"}, {"metadata", "namespace"}, {"metadata", "uid"}, {"metadata", "creationTimestamp"}}

// collectable says whether a group of stage i, its objects of one
// cleanup-priority, goes in one deletecollection that leaves out by name
// the leftOut objects of its resource that remain in the namespace then
// (the later groups, and objects of other stages or of none), at most
// MaxLeftOut: each of the group is deleted now and none forced after; the
// resource is one the admission policy refuses to create in the namespace,
// which is labelled (now, or by the signal step), so nothing new appears
// meanwhile, and no name left out is taken by another object; for
// ManifestWorks, no work's deleteOption is the operator's decision (no
// orphaning rule, not Needless), so a change to a work after this plan
// changes nothing the plan decided; no monitored resource is of the
// stage's resource, so no change to an object's metadata can make the gate
// wait for it; and the when of this stage and of every stage of the
// resource before it, if any, reads only fields of the object no write
// changes (ImmutableFields), so no change to an object can take it out of
// the stage, nor into an earlier one. The API server deletes each object of
// the collection by name, without the plan's resourceVersion, so the plan
// relies on this: what decides whether the stage deletes an object cannot
// change. Its cleanup-priority can, and only orders the deletes within the
// stage: a priority written between the executor's check and the server's
// delete of that name (the request's time: the server deletes a
// collection's objects one after another) changes the order of that
// object's delete, never whether the stage deletes it. The executor still
// deletes only the objects of the plan: it checks the namespace holds
// exactly them besides those it leaves out, and deletes the snapshot it
// checked (docs/developer/design.md, "One request for a group").
func (t *teardown) collectable(i int, s Stage, actions []Action, leftOut int) bool {
	if len(actions) < MinCollection || leftOut > MaxLeftOut || s.Outside() || !AdmissionGuarded(s.GVR) {
		return false
	}
	for _, earlier := range Stages(t.p)[:i+1] {
		if earlier.Outside() || earlier.GVR.GroupResource() != s.GVR.GroupResource() || earlier.When == nil {
			continue
		}
		if !earlier.When.ReadsOnlyPaths(cel.VarObject, ImmutableFields...) {
			return false
		}
	}
	for _, m := range MonitoredResources(t.p) {
		if m.GVR.GroupResource() == s.GVR.GroupResource() {
			return false
		}
	}
	ns := t.s.Namespace
	if ns == nil || ns.Name != t.plan.Cluster || (ns.Labels[v1alpha1.ClusterDeletingLabel] != "true" && !t.signalLabels()) {
		return false
	}
	if s.GVR == ManifestWorks && (len(t.p.Spec.Orphaning) > 0 || t.strategy == v1alpha1.RemoveStrategyNeedless) {
		return false
	}
	for _, a := range actions {
		if a.Verb != VerbDelete {
			return false
		}
	}
	return true
}

// AdmissionGuarded says whether the admission policy refuses new objects
// of the resource in the namespace of a cluster being deleted.
func AdmissionGuarded(gvr schema.GroupVersionResource) bool {
	return gvr.GroupResource() == ManifestWorks.GroupResource() || gvr.GroupResource() == ManagedClusterAddOns.GroupResource()
}
