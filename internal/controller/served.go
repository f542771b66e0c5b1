package controller

import (
	"context"
	"strings"

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
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// setNotServedCondition reports the fields naming unserved resources.
func setNotServedCondition(p *v1alpha1.CleanupPolicy, fields []decision.UnservedField) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.String()
	}
	msg := strings.Join(parts, "; ") +
		"; a cluster being deleted under this policy is held at that step until the resource is served or removed from the policy"
	setStalledCondition(p, v1alpha1.ResourceNotServedReason, msg)
	return msg
}

// deletingClusters maps an event that can end a hold (a CRD installed,
// changed or removed) to every cluster being torn down.
func (a *ClusterTeardown) deletingClusters(ctx context.Context, _ client.Object) []reconcile.Request {
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
func policyUnserved(mapper meta.RESTMapper, p *cel.Policy) ([]decision.UnservedField, error) {
	if mapper == nil {
		return nil, nil
	}
	return decision.UnservedFields(p.Spec, func(gvr schema.GroupVersionResource) (decision.Scope, error) {
		return snapshot.ScopeOf(mapper, gvr)
	})
}

// crdMetadata is a CustomResourceDefinition watched as metadata only.
func crdMetadata() *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	return crd
}
