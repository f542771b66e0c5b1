package admissionpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// SignalManifestsPolicy refuses a CleanupPolicy whose deletion-signal
// manifests are of a kind outside the operator's allow list.
const SignalManifestsPolicy = "cleanup-operator-signal-manifests"

// SignalLimits bound what a policy's deletion signal puts on every
// governed cluster: the kinds (apiVersion/kind, such as v1/ConfigMap), and
// the size of each manifest and of all of them, as JSON.
type SignalLimits struct {
	Kinds         []string
	MaxBytes      int
	MaxTotalBytes int
}

// DefaultSignalLimits allow ConfigMaps and Secrets, up to 16 KiB each and
// 64 KiB in all.
func DefaultSignalLimits() SignalLimits {
	return SignalLimits{Kinds: []string{"v1/ConfigMap", "v1/Secret"}, MaxBytes: 16 << 10, MaxTotalBytes: 64 << 10}
}

// OrDefault is l, or the defaults when l is the zero value.
func (l SignalLimits) OrDefault() SignalLimits {
	if l.Kinds == nil && l.MaxBytes == 0 && l.MaxTotalBytes == 0 {
		return DefaultSignalLimits()
	}
	return l
}

// KindOf is how the allow list names a manifest's kind: apiVersion/kind.
func KindOf(apiVersion, kind string) string {
	return apiVersion + "/" + kind
}

// Validate says what is wrong with the limits themselves.
func (l SignalLimits) Validate() error {
	if l.MaxBytes <= 0 || l.MaxTotalBytes <= 0 {
		return fmt.Errorf("the deletion-signal manifest size limits must be positive, not %d and %d", l.MaxBytes, l.MaxTotalBytes)
	}
	for _, k := range l.Kinds {
		i := strings.LastIndex(k, "/")
		if i <= 0 || i == len(k)-1 || strings.ContainsAny(k, "' \\") {
			return fmt.Errorf("deletion-signal kind %q: want apiVersion/Kind, such as v1/ConfigMap or example.com/v1/Signal", k)
		}
	}
	return nil
}

// Check names each manifest the limits refuse, with why; the JSON of each
// manifest is measured as stored.
func (l SignalLimits) Check(manifests []v1alpha1.Manifest) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "deletionSignal", "manifests")
	total := 0
	for i, m := range manifests {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(m.Raw, &head); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), "", err.Error()))
			continue
		}
		if kind := KindOf(head.APIVersion, head.Kind); !slices.Contains(l.Kinds, kind) {
			errs = append(errs, field.NotSupported(path.Index(i).Child("kind"), kind, l.Kinds))
		}
		total += len(m.Raw)
		if len(m.Raw) > l.MaxBytes {
			errs = append(errs, field.TooLong(path.Index(i), "", l.MaxBytes))
		}
	}
	if total > l.MaxTotalBytes {
		errs = append(errs, field.Invalid(path, fmt.Sprintf("%d bytes", total),
			fmt.Sprintf("the manifests total more than %d bytes, the operator's limit (--signal-manifests-max-total-bytes)", l.MaxTotalBytes)))
	}
	return errs
}

// signalManifestsPolicy refuses manifests of a kind outside l.Kinds. The
// API server's CEL cannot measure an object's JSON, so the sizes are
// checked by the webhook and, before any signal work is applied, by the
// operator.
func signalManifestsPolicy(l SignalLimits) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(SignalManifestsPolicy)
	p.Spec.MatchConstraints = writes(v1alpha1.GroupVersion.Group, "*", "cleanuppolicies")
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name: "manifests-created-or-changed",
		Expression: "has(object.spec.deletionSignal) && has(object.spec.deletionSignal.manifests) && " +
			"(request.operation == 'CREATE' || !has(oldObject.spec) || object.spec != oldObject.spec)",
	}}
	quoted := make([]string, len(l.Kinds))
	for i, k := range l.Kinds {
		quoted[i] = "'" + k + "'"
	}
	allowed := "[" + strings.Join(quoted, ", ") + "]"
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "manifests", Expression: "object.spec.deletionSignal.manifests"},
		{Name: "kinds", Expression: "variables.manifests.map(m, (has(m.apiVersion) ? m.apiVersion : '') + '/' + (has(m.kind) ? m.kind : ''))"},
		{Name: "refused", Expression: indexList(16) + ".filter(i, i < size(variables.kinds) && !(variables.kinds[i] in " + allowed + "))"},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "size(variables.refused) == 0",
		MessageExpression: "'CleanupPolicy ' + object.metadata.name + ': spec.deletionSignal.manifests[' + string(variables.refused[0]) + " +
			"']: kind ' + variables.kinds[variables.refused[0]] + ' is not one the cleanup operator puts on managed clusters; " +
			"it allows " + strings.ReplaceAll(strings.Join(l.Kinds, ", "), "'", "") + " (--signal-manifest-kinds)'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}

// EnsureSignalLimits creates the signal manifest policy for l, or updates
// it to l: the operator's flags say which kinds are allowed, so a policy
// rendered for other flags is brought in step. The operator calls it at
// start, before Ensure.
func EnsureSignalLimits(ctx context.Context, c client.Client, l SignalLimits) error {
	want := signalManifestsPolicy(l)
	current := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	err := c.Get(ctx, client.ObjectKeyFromObject(want), current)
	switch {
	case apierrors.IsNotFound(err):
		return ensure(ctx, c, want)
	case err != nil:
		return fmt.Errorf("getting ValidatingAdmissionPolicy %s: %w", want.Name, err)
	case equality.Semantic.DeepEqual(current.Spec.Variables, want.Spec.Variables) &&
		equality.Semantic.DeepEqual(current.Spec.Validations, want.Spec.Validations):
		return nil
	}
	current.Spec.Variables, current.Spec.Validations = want.Spec.Variables, want.Spec.Validations
	if err := c.Update(ctx, current, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("updating ValidatingAdmissionPolicy %s to the operator's signal limits: %w", want.Name, err)
	}
	logf.FromContext(ctx).Info("admission policy updated to the signal limits", "name", want.Name, "kinds", l.Kinds)
	return nil
}
