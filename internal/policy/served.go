package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// policyUnserved is what the policy reconciler reports of a compiled policy.
func policyUnserved(mapper meta.RESTMapper, p *cel.Policy) ([]decision.UnservedField, error) {
	if mapper == nil {
		return nil, nil
	}
	return decision.UnservedFields(p.Spec, func(gvr schema.GroupVersionResource) (decision.Scope, error) {
		return snapshot.ScopeOf(mapper, gvr)
	})
}
