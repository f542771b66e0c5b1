package decision

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// outOfOrder finds the add-ons and works of the cluster namespace being
// deleted before the step of the teardown that deletes them, and makes the
// next step report them (DeletedOutOfOrder); the record notes them as a
// hold (OutOfOrderHold).
// The operator deletes a stage's objects only once the stage is the next
// step, and the signal work in the signal step: any other deletion is
// someone else's, such as OCM's own cleanup when admission does not hold
// it. The teardown goes on as planned. A dry run holds nothing of OCM's
// and expects its deletions.
func (t *teardown) outOfOrder() {
	next := t.plan.Next()
	if t.plan.DryRun || next == nil || next.Report == nil {
		return
	}
	before := !slices.Contains([]StepKind{StepStage, StepNamespace, StepFinish}, next.Kind)
	later := map[types.UID]bool{}
	for _, st := range t.plan.Steps {
		if st.State == StateLater && st.Kind == StepStage {
			for _, a := range st.Actions {
				later[a.UID] = true
			}
		}
	}
	for _, gvr := range []schema.GroupVersionResource{ManagedClusterAddOns, ManifestWorks} {
		for _, o := range t.s.Objects[gvr] {
			m := o.Meta
			if m.DeletionTimestamp == nil || t.s.Memory.Deleted[m.UID] || m.Labels[v1alpha1.SignalWorkLabel] == "true" ||
				m.Namespace != t.plan.Cluster || !before && !later[m.UID] || ofAddOn(m) {
				continue
			}
			t.plan.OutOfOrder = append(t.plan.OutOfOrder, ResourceName(gvr)+"/"+m.Name)
		}
	}
	if len(t.plan.OutOfOrder) == 0 {
		return
	}
	slices.Sort(t.plan.OutOfOrder)
	msg := fmt.Sprintf("%d add-on(s) and work(s) of the cluster are being deleted by someone other than the operator, "+
		"before the step of the teardown that deletes them: %s; %s", len(t.plan.OutOfOrder), Bounded(t.plan.OutOfOrder, ", "), t.deleter())
	r := *next.Report
	r.Reason, r.Event, r.Message = v1alpha1.DeletedOutOfOrderReason, v1alpha1.DeletedOutOfOrderReason, msg+"; meanwhile: "+r.Message
	next.Report = &r
}

// OutOfOrderHold is why the record notes a hold while add-ons or works are
// deleted out of order; "" when none is.
func (p *Plan) OutOfOrderHold() string {
	if len(p.OutOfOrder) == 0 {
		return ""
	}
	return "deleted by someone other than the operator before their step: " + Bounded(p.OutOfOrder, ", ")
}

// deleter says who deletes out of order, as far as the API shows it: it
// records no deleter, but OCM's own cleanup runs on a cluster that carries
// its finalizer, and deletes there unless admission holds it.
func (t *teardown) deleter() string {
	if slices.Contains(t.s.Cluster.GetFinalizers(), v1alpha1.OCMResourceCleanupFinalizer) {
		return "the API does not record who deleted them; OCM's resource cleanup runs on this cluster (finalizer " +
			v1alpha1.OCMResourceCleanupFinalizer + "): if it deleted them, the admission policy cleanup-operator-ocm-cleanup-hold " +
			"did not hold it: check that it exists and that the operator's --ocm-cleanup-users names the user " +
			"OCM's registration controller runs as"
	}
	return "the API does not record who deleted them"
}

// ofAddOn says whether a work belongs to an add-on (an owner reference to
// its ManagedClusterAddOn): the add-on's manager, or the garbage collector
// once the add-on is gone, deletes it with its add-on.
func ofAddOn(m *metav1.PartialObjectMetadata) bool {
	return slices.ContainsFunc(m.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "ManagedClusterAddOn" && strings.HasPrefix(o.APIVersion, ManagedClusterAddOns.Group+"/")
	})
}
