package admissionpolicy

import (
	"fmt"

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
	// DeletionProtectionPolicy refuses to delete a ManagedCluster marked
	// deletion-protected unless its deletion is confirmed.
	DeletionProtectionPolicy = "cleanup-operator-deletion-protection"
	// DeleteConfirmationPolicy refuses a deletion confirmation whose value
	// is not the ManagedCluster's own name.
	DeleteConfirmationPolicy = "cleanup-operator-delete-confirmation"
)

// BindingName is the name of the binding of the policy named policy.
func BindingName(policy string) string {
	return policy + "-binding"
}

// Objects returns the policies and their bindings, each policy followed by
// its binding, with the default signal limits. Every call returns new
// objects, which the caller may change.
func Objects() []client.Object {
	return ObjectsFor(DefaultSignalLimits())
}

// ObjectsFor is Objects with the signal manifest policy rendered for l.
func ObjectsFor(l SignalLimits) []client.Object {
	return []client.Object{
		deletingClusterPolicy(),
		binding(DeletingClusterPolicy),
		deletingWorkPolicy(),
		binding(DeletingWorkPolicy),
		deletionProtectionPolicy(),
		binding(DeletionProtectionPolicy),
		deleteConfirmationPolicy(),
		binding(DeleteConfirmationPolicy),
		signalManifestsPolicy(l),
		binding(SignalManifestsPolicy),
		releasePolicy(),
		binding(ReleasePolicy),
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

// annotation is a CEL expression for the value of an annotation of obj
// (object or oldObject), or ” when it has none.
func annotation(obj, key string) string {
	return fmt.Sprintf("has(%[1]s.metadata.annotations) && '%[2]s' in %[1]s.metadata.annotations ? %[1]s.metadata.annotations['%[2]s'] : ''", obj, key)
}

// confirmHowTo is how a deletion is confirmed, for the refusals.
const confirmHowTo = "'kubectl cleanup confirm-delete ' + oldObject.metadata.name + " +
	"' (it sets the annotation " + v1alpha1.DeleteConfirmedAnnotation + "=' + oldObject.metadata.name + " +
	"' and " + v1alpha1.DeleteConfirmedAtAnnotation + " to the time; the confirmation counts once the cleanup operator has accepted it, " +
	"for 1h unless the operator runs with another --delete-confirmation-max-age)'"

// deletionProtectionPolicy refuses DELETE of a ManagedCluster the operator
// marked protected, unless it carries a confirmation that names it and
// that the operator accepted (admission cannot read the clock, so the
// operator says which confirmation is young enough, and takes it back
// when it expires). A deletecollection is admitted object by object as
// DELETE, so it is refused for each protected cluster too.
func deletionProtectionPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(DeletionProtectionPolicy)
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{
		// For DELETE the selector reads the object being deleted.
		ObjectSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{v1alpha1.DeletionProtectedLabel: "true"},
		},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			rule(admissionregistrationv1.Delete, "cluster.open-cluster-management.io", "v1", "managedclusters"),
		},
	}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "confirmed", Expression: annotation("oldObject", v1alpha1.DeleteConfirmedAnnotation)},
		{Name: "confirmedAt", Expression: annotation("oldObject", v1alpha1.DeleteConfirmedAtAnnotation)},
		{Name: "accepted", Expression: annotation("oldObject", v1alpha1.DeleteConfirmationAcceptedAnnotation)},
		{Name: "policy", Expression: annotation("oldObject", v1alpha1.GoverningPolicyAnnotation)},
	}
	protected := "'ManagedCluster ' + oldObject.metadata.name + ' is protected from deletion (label " + v1alpha1.DeletionProtectedLabel +
		"=true, from spec.deletionProtection of CleanupPolicy ' + variables.policy + ')"
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression:        "variables.confirmed != ''",
		Message:           "the ManagedCluster is protected from deletion: confirm first with kubectl cleanup confirm-delete NAME",
		MessageExpression: protected + ": to delete it, confirm first with ' + " + confirmHowTo,
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression: "variables.confirmed == '' || variables.confirmed == oldObject.metadata.name",
		Message:    "the ManagedCluster is protected from deletion: its annotation " + v1alpha1.DeleteConfirmedAnnotation + " is not its own name",
		MessageExpression: protected + ": its annotation " + v1alpha1.DeleteConfirmedAnnotation +
			" is \"' + variables.confirmed + '\", not the cluster\\'s own name; confirm with ' + " + confirmHowTo,
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression: "variables.confirmed != oldObject.metadata.name || (variables.confirmedAt != '' && variables.accepted == variables.confirmedAt)",
		Message:    "the ManagedCluster is protected from deletion: its confirmation has expired or is not accepted yet",
		MessageExpression: protected + ": its confirmation' + (variables.confirmedAt == '' ? ' has no time (" + v1alpha1.DeleteConfirmedAtAnnotation + ")' : ' of ' + variables.confirmedAt + " +
			"(variables.accepted == '' ? ' is not accepted: it expired, or the cleanup operator has not seen it yet' : ' is not the one the cleanup operator accepted')) + '; confirm again with ' + " + confirmHowTo,
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}

// deleteConfirmationPolicy refuses to create or update a ManagedCluster so
// that its deletion confirmation names another cluster: a confirmation is
// typed for the one cluster it confirms, and one copied from another
// cluster's manifest must not count. Only a request that sets or changes
// the annotation is checked.
func deleteConfirmationPolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(DeleteConfirmationPolicy)
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"cluster.open-cluster-management.io"},
					APIVersions: []string{"v1"},
					Resources:   []string{"managedclusters"},
				},
			},
		}},
	}
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name: "confirmation-set-or-changed",
		Expression: "(" + annotation("object", v1alpha1.DeleteConfirmedAnnotation) + ") != '' && " +
			"(oldObject == null || (" + annotation("oldObject", v1alpha1.DeleteConfirmedAnnotation) + ") != (" +
			annotation("object", v1alpha1.DeleteConfirmedAnnotation) + "))",
	}}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "object.metadata.annotations['" + v1alpha1.DeleteConfirmedAnnotation + "'] == object.metadata.name",
		Message:    "the annotation " + v1alpha1.DeleteConfirmedAnnotation + " must be the ManagedCluster's own name",
		MessageExpression: "'the annotation " + v1alpha1.DeleteConfirmedAnnotation + " of ManagedCluster ' + object.metadata.name + ' is \"' + " +
			"object.metadata.annotations['" + v1alpha1.DeleteConfirmedAnnotation + "'] + '\", not the cluster\\'s own name: " +
			"it confirms the deletion of this one cluster; use kubectl cleanup confirm-delete ' + object.metadata.name",
		Reason: ptr.To(metav1.StatusReasonForbidden),
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

// writes matches the creates and updates of a resource.
func writes(group, version, resource string) *admissionregistrationv1.MatchResources {
	r := rule(admissionregistrationv1.Create, group, version, resource)
	r.Operations = append(r.Operations, admissionregistrationv1.Update)
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{r}}
}

// clusterWrites matches the creates and updates of ManagedClusters.
func clusterWrites() *admissionregistrationv1.MatchResources {
	return writes("cluster.open-cluster-management.io", "v1", "managedclusters")
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
