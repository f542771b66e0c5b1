package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// A monitored resource or a stage that names a resource the API server does
// not serve (a typo in its group, version or resource, or a CRD not
// installed yet) cannot be listed: taking it for empty would open the gate,
// or skip the stage, and delete the namespace while objects of the intended
// resource remain. Such a policy is not Ready, and a teardown under it holds
// at that step until the resource is served (a CRD installed later: its
// events bring the clusters and policies back) or removed from the policy.

// unservedRetry is how soon a teardown held on an unserved resource looks
// again without a CRD event: the API server may serve a new CRD's resource
// shortly after the CRD's last event.
const unservedRetry = 30 * time.Second

// unservedField is a field of a policy naming a resource not served.
type unservedField struct {
	path string
	gvr  schema.GroupVersionResource
}

func (f unservedField) String() string {
	return fmt.Sprintf("%s: resource %s/%s is not served by the API server", f.path, decision.ResourceName(f.gvr), f.gvr.Version)
}

// unservedFields returns the policy's monitored resources and stages that
// the API server does not serve, with their field paths. served says
// whether the API server serves a resource.
func unservedFields(spec *v1alpha1.CleanupPolicySpec, served func(schema.GroupVersionResource) (bool, error)) ([]unservedField, error) {
	var out []unservedField
	check := func(path string, g v1alpha1.GroupVersionResource) error {
		gvr := schema.GroupVersionResource{Group: g.Group, Version: g.Version, Resource: g.Resource}
		ok, err := served(gvr)
		if err != nil {
			return err
		}
		if !ok {
			out = append(out, unservedField{path: path, gvr: gvr})
		}
		return nil
	}
	for i, m := range spec.MonitoredResources {
		if err := check(fmt.Sprintf("spec.monitoredResources[%d]", i), m.GroupVersionResource); err != nil {
			return nil, err
		}
	}
	for i, s := range spec.DeletionStages {
		if err := check(fmt.Sprintf("spec.deletionStages[%d]", i), s.GroupVersionResource); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mapperServes says, through the REST mapper, whether the API server
// serves a resource. The mapper asks the API server again for a group
// version it did not know, so a CRD installed later is found.
func mapperServes(mapper meta.RESTMapper) func(schema.GroupVersionResource) (bool, error) {
	return func(gvr schema.GroupVersionResource) (bool, error) {
		_, err := mapper.KindFor(gvr)
		switch {
		case meta.IsNoMatchError(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("mapping %s: %w", gvr, err)
		}
		return true, nil
	}
}

// setNotServedCondition reports the fields naming unserved resources.
func setNotServedCondition(p *v1alpha1.CleanupPolicy, fields []unservedField) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.String()
	}
	msg := strings.Join(parts, "; ") +
		"; a cluster being deleted under this policy is held at that step until the resource is served or removed from the policy"
	setStalledCondition(p, v1alpha1.ResourceNotServedReason, msg)
	return msg
}

// listServed lists a resource's objects in the cluster namespace, and
// records a resource the API server does not serve.
func (a *ManagedClusterAdapter) listServed(ctx context.Context, c *cleanup, gvr schema.GroupVersionResource) ([]metav1.PartialObjectMetadata, error) {
	_, served, err := a.watches.ensure(ctx, gvr)
	if err != nil {
		return nil, err
	}
	if !served {
		if c.unserved == nil {
			c.unserved = map[schema.GroupVersionResource]bool{}
		}
		c.unserved[gvr] = true
		return nil, nil
	}
	return a.watches.list(ctx, a.Client, gvr, c.mc.GetName())
}

// heldOnUnserved returns the step that holds the teardown when one of the
// given fields of the policy names a resource not served.
func (c *cleanup) heldOnUnserved(where string, fields []unservedField) (step, bool) {
	var parts []string
	for _, f := range fields {
		if c.unserved[f.gvr] {
			parts = append(parts, f.String())
		}
	}
	if len(parts) == 0 {
		return step{}, false
	}
	msg := fmt.Sprintf("held at %s, nothing more is deleted: %s; the hold ends when the resource is served or removed from CleanupPolicy %s",
		where, strings.Join(parts, "; "), c.g.Policy.Name)
	if c.dryRun {
		c.plan = append(c.plan, "would hold: "+msg)
		return step{done: true}, true
	}
	return step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason, action: "Hold/" + where,
		message: msg, requeue: unservedRetry}, true
}

// gateUnserved holds the gate on a monitored resource not served.
func (c *cleanup) gateUnserved() (step, bool) {
	var fields []unservedField
	for i, m := range c.g.Policy.Spec.MonitoredResources {
		fields = append(fields, unservedField{path: fmt.Sprintf("spec.monitoredResources[%d]", i),
			gvr: schema.GroupVersionResource{Group: m.Group, Version: m.Version, Resource: m.Resource}})
	}
	return c.heldOnUnserved("the gate", fields)
}

// stageUnserved holds the stage i of n on its resource not served. Only a
// stage the policy declares holds: the default stages' kinds may be absent
// from a hub, and then nothing of them can exist.
func (c *cleanup) stageUnserved(i, n int, s decision.Stage) (step, bool) {
	if len(c.g.Policy.Spec.DeletionStages) == 0 {
		return step{}, false
	}
	return c.heldOnUnserved(fmt.Sprintf("stage %s (%d of %d)", s.Name, i+1, n),
		[]unservedField{{path: fmt.Sprintf("spec.deletionStages[%d]", i), gvr: s.GVR}})
}

// deletingClusters maps an event that can end a hold (a CRD installed,
// changed or removed) to every cluster being torn down.
func (a *ManagedClusterAdapter) deletingClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	list := newManagedClusterList()
	if err := a.Client.List(ctx, list); err != nil {
		logf.FromContext(ctx).Error(err, "listing ManagedClusters")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		mc := &list.Items[i]
		if mc.GetDeletionTimestamp() != nil && controllerutil.ContainsFinalizer(mc, v1alpha1.ClusterCleanupFinalizer) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: mc.GetName()}})
		}
	}
	return reqs
}

// policyUnserved is what the policy reconciler reports of a compiled policy.
func policyUnserved(mapper meta.RESTMapper, p *cel.Policy) ([]unservedField, error) {
	if mapper == nil {
		return nil, nil
	}
	return unservedFields(p.Spec, mapperServes(mapper))
}

// crdMetadata is a CustomResourceDefinition watched as metadata only.
func crdMetadata() *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	return crd
}
