package v1alpha1

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// +kubebuilder:webhook:path=/validate-cleanup-fleetops-dev-v1alpha1-cleanuppolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=cleanup.fleetops.dev,resources=cleanuppolicies,verbs=create;update,versions=v1alpha1,name=vcleanuppolicy-v1alpha1.cleanup.fleetops.dev,admissionReviewVersions=v1

// CleanupPolicyValidator refuses a CleanupPolicy that the reconciler could
// not run: it compiles the policy exactly as the reconciler does.
type CleanupPolicyValidator struct {
	Env *cel.Env
}

var _ admission.Validator[*v1alpha1.CleanupPolicy] = &CleanupPolicyValidator{}

// SetupCleanupPolicyWebhookWithManager registers the validator with the manager's webhook server.
func SetupCleanupPolicyWebhookWithManager(mgr manager.Manager, env *cel.Env) error {
	return builder.WebhookManagedBy(mgr, &v1alpha1.CleanupPolicy{}).
		WithValidator(&CleanupPolicyValidator{Env: env}).
		Complete()
}

// ValidateCreate compiles the new policy.
func (v *CleanupPolicyValidator) ValidateCreate(_ context.Context, p *v1alpha1.CleanupPolicy) (admission.Warnings, error) {
	return v.validate(p)
}

// ValidateUpdate compiles the policy when its spec changed. A policy whose
// spec is unchanged is let through, so that its labels, annotations and
// finalizers can always be changed.
func (v *CleanupPolicyValidator) ValidateUpdate(_ context.Context, old, p *v1alpha1.CleanupPolicy) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	return v.validate(p)
}

// ValidateDelete allows every deletion.
func (v *CleanupPolicyValidator) ValidateDelete(context.Context, *v1alpha1.CleanupPolicy) (admission.Warnings, error) {
	return nil, nil
}

func (v *CleanupPolicyValidator) validate(p *v1alpha1.CleanupPolicy) (admission.Warnings, error) {
	if _, errs := cel.Compile(v.Env, p); len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("CleanupPolicy").GroupKind(), p.Name, errs)
	}
	return v.warnings(p), nil
}

// warnings say which expressions are checked at run time only because the
// CRD of their variable was not installed when the operator started.
func (v *CleanupPolicyValidator) warnings(p *v1alpha1.CleanupPolicy) admission.Warnings {
	var w admission.Warnings
	uses := map[string]bool{
		cel.VarCluster: p.Spec.ClusterSelector != "" || len(p.Spec.Variables) > 0,
		cel.VarWork:    len(p.Spec.Orphaning) > 0,
		cel.VarPolicy:  p.Spec.Prune != nil && len(p.Spec.Prune.Rules) > 0,
	}
	for _, name := range []string{cel.VarCluster, cel.VarWork, cel.VarPolicy} {
		if uses[name] && !v.Env.Typed(name) {
			w = append(w, fmt.Sprintf("`%s` is not type-checked: its CRD was not installed when the operator started; its fields are checked at run time", name))
		}
	}
	return w
}
