package admissionpolicy

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// The policies the operator relies on. config/admission holds the same
// objects as YAML; a test fails when the two drift apart.
const (
	// DeletingClusterPolicy refuses new ManifestWorks and
	// ManagedClusterAddOns in the namespace of a cluster being cleaned up.
	DeletingClusterPolicy = "cleanup-operator-deleting-cluster"
	// DeletingWorkPolicy refuses a change of spec.deleteOption on a
	// ManifestWork being deleted.
	DeletingWorkPolicy = "cleanup-operator-deleting-work"
)

// BindingName is the name of the binding of the policy named policy.
func BindingName(policy string) string {
	return policy + "-binding"
}

// Objects returns the policies and their bindings, each policy followed by
// its binding. Every call returns new objects, which the caller may change.
func Objects() []client.Object {
	return []client.Object{
		deletingClusterPolicy(),
		binding(DeletingClusterPolicy),
		deletingWorkPolicy(),
		binding(DeletingWorkPolicy),
	}
}

func deletingClusterPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(DeletingClusterPolicy)
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{
		// The selector picks the namespaces: every request it lets through is refused.
		NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{v1alpha1.ClusterDeletingLabel: "true"},
		},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			rule(admissionregistrationv1.Create, "work.open-cluster-management.io", "v1", "manifestworks"),
			rule(admissionregistrationv1.Create, "addon.open-cluster-management.io", "v1alpha1", "managedclusteraddons"),
		},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "false",
		Message:    "the cluster is being deleted: new ManifestWorks and ManagedClusterAddOns are refused in its namespace until its cleanup ends",
		MessageExpression: "'cluster ' + request.namespace + ' is being deleted: " +
			"new ManifestWorks and ManagedClusterAddOns are refused in its namespace until its cleanup ends'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}

func deletingWorkPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(DeletingWorkPolicy)
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			rule(admissionregistrationv1.Update, "work.open-cluster-management.io", "v1", "manifestworks"),
		},
	}
	// Only works being deleted are checked; any other change to them, such
	// as removing a finalizer, passes.
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "work-is-being-deleted",
		Expression: "has(oldObject.metadata.deletionTimestamp)",
	}}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "hadDeleteOption", Expression: "has(oldObject.spec) && has(oldObject.spec.deleteOption)"},
		{Name: "hasDeleteOption", Expression: "has(object.spec) && has(object.spec.deleteOption)"},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "variables.hadDeleteOption == variables.hasDeleteOption && " +
			"(!variables.hasDeleteOption || object.spec.deleteOption == oldObject.spec.deleteOption)",
		Message:           "the ManifestWork is being deleted: its spec.deleteOption can no longer change",
		MessageExpression: "'ManifestWork ' + object.metadata.name + ' is being deleted: its spec.deleteOption can no longer change'",
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}

func policy(name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta: metav1.TypeMeta{
			APIVersion: admissionregistrationv1.SchemeGroupVersion.String(),
			Kind:       "ValidatingAdmissionPolicy",
		},
		ObjectMeta: objectMeta(name),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		},
	}
}

func binding(policy string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta: metav1.TypeMeta{
			APIVersion: admissionregistrationv1.SchemeGroupVersion.String(),
			Kind:       "ValidatingAdmissionPolicyBinding",
		},
		ObjectMeta: objectMeta(BindingName(policy)),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"app.kubernetes.io/name": "cleanup-operator"},
	}
}

func rule(op admissionregistrationv1.OperationType, group, version, resource string) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{op},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{group},
				APIVersions: []string{version},
				Resources:   []string{resource},
			},
		},
	}
}
