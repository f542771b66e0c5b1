package teardown

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// The admission policy that makes a deletecollection safe: in force, as
// the operator renders it, settled (see teardown_collection.go).

// AdmissionSettle is how long the admission policy that refuses new
// objects in a deleting cluster's namespace, and its binding, must have
// been as they are (created, or last written) before a group is deleted in
// one request: each API server loads them from a watch, so one written
// moments ago may not be enforced everywhere yet.
//
// It is a margin over the delay of a watch, not a proof: docs/developer/design.md,
// "One request for a group".
const AdmissionSettle = 5 * time.Second

// admissionInForce says why the admission policy that refuses new
// ManifestWorks and ManagedClusterAddOns in a deleting cluster's namespace
// is not known to be in force ("" when it is): it and its binding must
// exist, not be being deleted, equal what admissionpolicy.Objects makes
// (rules, match conditions, validations; the binding's policy, match
// resources and actions: an administrator's edit, even one that narrows
// them, means no collection), and not have been written for
// a.admissionSettle. In force, it returns the resourceVersions of both.
func (a *ClusterTeardown) admissionInForce(ctx context.Context) (why, versions string, err error) {
	var wantPolicy *admissionregistrationv1.ValidatingAdmissionPolicy
	var wantBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, obj := range admissionpolicy.Objects() {
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if o.Name == admissionpolicy.DeletingClusterPolicy {
				wantPolicy = o
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if o.Name == admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy) {
				wantBinding = o
			}
		}
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(wantPolicy), &policy); err != nil {
		return "the policy cannot be read", "", client.IgnoreNotFound(err)
	}
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(wantBinding), &binding); err != nil {
		return "the binding cannot be read", "", client.IgnoreNotFound(err)
	}
	switch {
	case policy.DeletionTimestamp != nil || binding.DeletionTimestamp != nil:
		return "the policy or its binding is being deleted", "", nil
	case !equality.Semantic.DeepEqual(defaultedPolicy(policy.Spec), defaultedPolicy(wantPolicy.Spec)):
		return "the policy differs from the operator's", "", nil
	case !equality.Semantic.DeepEqual(defaultedBinding(binding.Spec), defaultedBinding(wantBinding.Spec)):
		return "the binding differs from the operator's", "", nil
	case time.Since(lastWritten(&policy)) < a.admissionSettle || time.Since(lastWritten(&binding)) < a.admissionSettle:
		return fmt.Sprintf("the policy or its binding was written less than %s ago", a.admissionSettle), "", nil
	}
	return "", policy.ResourceVersion + "," + binding.ResourceVersion, nil
}

// admissionProbe names the work a dry-run create asks the API server for.
const admissionProbe = "cleanup-operator-admission-probe"

// admissionRefuses says whether the API server refuses, by the operator's
// admission policy, a new ManifestWork in the namespace: a dry run, which
// writes nothing.
func (a *ClusterTeardown) admissionRefuses(ctx context.Context, namespace string) (bool, error) {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": decision.ManifestWorks.GroupVersion().String(), "kind": "ManifestWork",
		"metadata": map[string]any{"name": admissionProbe, "namespace": namespace,
			"labels": map[string]any{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}},
		"spec": map[string]any{"workload": map[string]any{}},
	}}
	err := a.Client.Create(ctx, probe, client.DryRunAll)
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), admissionpolicy.DeletingClusterPolicy):
		return true, nil
	case apierrors.IsForbidden(err) || apierrors.IsAlreadyExists(err):
		return false, nil
	}
	return false, err
}

// lastWritten is when the object was created or last written, as its
// managed fields record.
func lastWritten(obj metav1.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

// defaultedPolicy is a policy's spec with the API server's defaults set,
// to compare one as created with one as read.
func defaultedPolicy(spec admissionregistrationv1.ValidatingAdmissionPolicySpec) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	spec = *spec.DeepCopy()
	if spec.FailurePolicy == nil {
		spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	spec.MatchConstraints = defaultedMatch(spec.MatchConstraints)
	return spec
}

// defaultedBinding is a binding's spec with the API server's defaults set;
// match resources that select nothing more than the policy are none.
func defaultedBinding(spec admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec {
	spec = *spec.DeepCopy()
	spec.MatchResources = defaultedMatch(spec.MatchResources)
	if spec.MatchResources != nil && equality.Semantic.DeepEqual(*spec.MatchResources, *defaultedMatch(&admissionregistrationv1.MatchResources{})) {
		spec.MatchResources = nil
	}
	return spec
}

func defaultedMatch(m *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
	if m == nil {
		return nil
	}
	m = m.DeepCopy()
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}
		}
	}
	return m
}
