package v1alpha1

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// +kubebuilder:webhook:path=/validate-cleanup-fleetops-dev-v1alpha1-cleanuppolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=cleanup.fleetops.dev,resources=cleanuppolicies,verbs=create;update,versions=v1alpha1,name=vcleanuppolicy-v1alpha1.cleanup.fleetops.dev,admissionReviewVersions=v1

// CleanupPolicyValidator refuses a CleanupPolicy that the reconciler could
// not run: it compiles the policy exactly as the reconciler does.
type CleanupPolicyValidator struct {
	Env *cel.Env
	// SignalLimits bound the deletion-signal manifests; zero: the defaults.
	SignalLimits admissionpolicy.SignalLimits
	// RecordMaxAge is how long teardown records are kept
	// (--teardown-record-max-age); 0: no bound. A blast-radius window
	// longer than it is refused (CheckWindow).
	RecordMaxAge time.Duration
}

var _ admission.Validator[*v1alpha1.CleanupPolicy] = &CleanupPolicyValidator{}

// ValidatePath is where the API server calls the validator.
const ValidatePath = "/validate-cleanup-fleetops-dev-v1alpha1-cleanuppolicy"

// SetupCleanupPolicyWebhookWithManager registers the validator with the manager's webhook server.
func SetupCleanupPolicyWebhookWithManager(mgr manager.Manager, env *cel.Env, limits admissionpolicy.SignalLimits, recordMaxAge time.Duration) error {
	v := &CleanupPolicyValidator{Env: env, SignalLimits: limits, RecordMaxAge: recordMaxAge}
	mgr.GetWebhookServer().Register(ValidatePath, &admission.Webhook{Handler: &handler{validator: v}})
	return nil
}

// handler decodes each request as the operator reads stored policies, one
// field at a time: a policy stored with a value the typed API cannot read
// (a timeout written before the schema refused it) must not stop the fix
// of that value, nor changes of its labels and finalizers.
type handler struct {
	validator *CleanupPolicyValidator
}

// Handle implements admission.Handler.
func (h *handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	p, errs, err := decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var warnings admission.Warnings
	switch req.Operation {
	case admissionv1.Create:
		if len(errs) > 0 {
			return invalid(p, errs)
		}
		warnings, err = h.validator.ValidateCreate(ctx, p)
	case admissionv1.Update:
		old, oldErrs, decodeErr := decode(req.OldObject.Raw)
		switch {
		case decodeErr != nil:
			return admission.Errored(http.StatusBadRequest, decodeErr)
		case len(errs) == 0 && len(oldErrs) == 0:
			warnings, err = h.validator.ValidateUpdate(ctx, old, p)
		case sameSpec(req.Object.Raw, req.OldObject.Raw):
			// Labels, annotations and finalizers can always change.
			return admission.Allowed("")
		case len(errs) > 0:
			return invalid(p, errs)
		default:
			// The old spec does not decode: the new one is checked whole.
			warnings, err = h.validator.validate(p)
		}
	default:
		return admission.Allowed("")
	}
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			st := status.Status()
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}.WithWarnings(warnings...)
		}
		return admission.Denied(err.Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// decode reads a policy from a request; errs name the fields the typed API
// cannot hold, err says the request is not a JSON object.
func decode(raw []byte) (*v1alpha1.CleanupPolicy, field.ErrorList, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, nil, err
	}
	p, errs := cel.DecodePolicy(obj)
	return p, errs, nil
}

func invalid(p *v1alpha1.CleanupPolicy, errs field.ErrorList) admission.Response {
	status := apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("CleanupPolicy").GroupKind(), p.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}

func sameSpec(a, b []byte) bool {
	var x, y struct {
		Spec any `json:"spec"`
	}
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x.Spec, y.Spec)
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
	compiled, errs := cel.Compile(v.Env, p)
	if p.Spec.DeletionSignal != nil {
		// The admission policy checks the kinds; only here are the sizes checked at admission.
		errs = append(errs, v.SignalLimits.OrDefault().Check(p.Spec.DeletionSignal.Manifests)...)
	}
	errs = append(errs, CheckWindow(p.Spec.BlastRadius, v.RecordMaxAge)...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("CleanupPolicy").GroupKind(), p.Name, errs)
	}
	w := v.warnings(p)
	if compiled.ReadsManifests() {
		w = append(w, ReadsManifestsWarning)
	}
	return w, nil
}

// SuspendWarning is the admission warning of a suspended policy.
const SuspendWarning = "spec.suspend is true: the operator writes nothing for the clusters, works and ConfigurationPolicies " +
	"this policy governs (a cluster deleted meanwhile waits) until spec.suspend is false or removed"

// ReadsManifestsWarning says that a policy's orphaning rules read more of the
// manifests than the operator caches.
const ReadsManifestsWarning = "spec.orphaning: a rule reads more of a manifest than apiVersion, kind, metadata.name and " +
	"metadata.namespace (or reads work.spec.workload); the operator caches only those, so it reads each governed " +
	"work's manifests from the API server when it decides its deleteOption"

// warnings say which expressions are checked at run time only because the
// CRD of their variable was not installed when the operator started, and
// that a suspended policy makes no write.
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
	if p.Spec.Suspend {
		w = append(w, SuspendWarning)
	}
	return w
}

// CheckWindow refuses a blast-radius window longer than the teardown
// records are kept (recordMaxAge, 0: no bound): the budget counts the
// teardowns of clusters already gone by their records, and a record swept
// within the window would let more teardowns begin than the policy allows.
// Clamping the window instead would do just that, so it is refused.
func CheckWindow(b *v1alpha1.BlastRadius, recordMaxAge time.Duration) field.ErrorList {
	if b == nil || b.Window == nil || recordMaxAge <= 0 || b.Window.Duration <= recordMaxAge {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "blastRadius", "window"), b.Window.Duration.String(),
		fmt.Sprintf("longer than the operator keeps teardown records (--teardown-record-max-age %s): the teardowns of "+
			"clusters already gone would not be counted for the whole window; shorten the window or raise the flag", recordMaxAge))}
}
