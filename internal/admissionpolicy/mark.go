package admissionpolicy

import (
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// The policies that keep deletion protection from being walked around by
// a patch: they name the operator, so they are rendered for the user it
// authenticates as (OperatorUser).
const (
	// ProtectionMarkPolicy guards the operator's marks on a ManagedCluster:
	// only the operator adds or removes the deletion-protection label,
	// writes the acceptance of a deletion confirmation, and sets, changes
	// or removes the pin to the governing policy.
	ProtectionMarkPolicy = "cleanup-operator-protection-mark"
	// ProtectedNamespacePolicy refuses DELETE of the namespace of a
	// protected ManagedCluster unless the cluster's deletion is confirmed
	// (and accepted) or under way.
	ProtectedNamespacePolicy = "cleanup-operator-protected-namespace"
	// TeardownConditionPolicy lets only the operator write a ManagedCluster's
	// ContentDeleteSuccess condition, which the blast radius reads to tell
	// a teardown begun, held or ended.
	TeardownConditionPolicy = "cleanup-operator-teardown-condition"
	// WorkOwnerPolicy lets only the operator give a ManifestWork the label
	// that makes it the operator's own (v1alpha1.ManagedByLabel with the
	// value v1alpha1.ManagedBy), or take it off: the operator changes,
	// retires and deletes its own signal works, so whoever gave a work
	// that label could have the operator delete it for them.
	WorkOwnerPolicy = "cleanup-operator-work-owner"
)

// DefaultOperatorUser is the user the operator authenticates as when
// config/default installs it; config/admission renders the policies for it.
const DefaultOperatorUser = "system:serviceaccount:cleanup-operator-system:cleanup-operator-controller-manager"

// ProtectionObjects returns the policies that name the operator, rendered
// for operatorUser, each followed by its binding.
func ProtectionObjects(operatorUser string) []client.Object {
	return []client.Object{
		authorityPolicy(operatorUser),
		binding(AuthorityPolicy),
		protectionMarkPolicy(operatorUser),
		binding(ProtectionMarkPolicy),
		protectedNamespacePolicy(operatorUser),
		protectedNamespaceBinding(),
		teardownConditionPolicy(operatorUser),
		binding(TeardownConditionPolicy),
		governedNamespacePolicy(operatorUser),
		binding(GovernedNamespacePolicy),
		workOwnerPolicy(operatorUser),
		binding(WorkOwnerPolicy),
	}
}

// AllObjects are Objects, ProtectionObjects and OCMCleanupObjects: every
// admission object the operator keeps, with the defaults.
func AllObjects(operatorUser string) []client.Object {
	return AllObjectsFor(operatorUser, DefaultSignalLimits(), DefaultOCMCleanupUsers)
}

// AllObjectsFor is AllObjects with the signal-manifest policy rendered for
// the limits l and OCM's cleanup held as ocmUsers (nil: the default users;
// empty: none), as the operator runs it.
func AllObjectsFor(operatorUser string, l SignalLimits, ocmUsers []string) []client.Object {
	if ocmUsers == nil {
		ocmUsers = DefaultOCMCleanupUsers
	}
	return append(append(ObjectsFor(l), ProtectionObjects(operatorUser)...), OCMCleanupObjects(ocmUsers)...)
}

// notOperator matches the requests of anyone but the operator and the
// members of system:masters, whom no admission policy binds anyway (they
// may delete the policy itself).
func notOperator(operatorUser string) admissionregistrationv1.MatchCondition {
	return admissionregistrationv1.MatchCondition{Name: "not-the-operator",
		Expression: "request.userInfo.username != " + strconv.Quote(operatorUser) +
			" && !(has(request.userInfo.groups) && 'system:masters' in request.userInfo.groups)"}
}

// protectionMarkPolicy refuses anyone but the operator a request that
// adds, removes or changes the protection label of a ManagedCluster, that
// writes an acceptance (removing one only protects more), or that sets,
// changes or removes the pin (v1alpha1.GoverningPolicyAnnotation).
// Together with the deletion-protection policy, a patch can then forge
// nothing: a confirmation counts only once the operator accepted it, a
// deleting cluster is torn down by the policy the operator pinned, and the
// blast-radius release policy checks the policy the operator pinned.
func protectionMarkPolicy(operatorUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(ProtectionMarkPolicy)
	p.Spec.MatchConstraints = clusterWrites()
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{notOperator(operatorUser)}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "mark", Expression: label("object", v1alpha1.DeletionProtectedLabel)},
		{Name: "oldMark", Expression: "oldObject == null ? '' : (" + label("oldObject", v1alpha1.DeletionProtectedLabel) + ")"},
		{Name: "accepted", Expression: annotation("object", v1alpha1.DeleteConfirmationAcceptedAnnotation)},
		{Name: "oldAccepted", Expression: "oldObject == null ? '' : (" + annotation("oldObject", v1alpha1.DeleteConfirmationAcceptedAnnotation) + ")"},
		{Name: "pin", Expression: annotation("object", v1alpha1.GoverningPolicyAnnotation)},
		{Name: "oldPin", Expression: "oldObject == null ? '' : (" + annotation("oldObject", v1alpha1.GoverningPolicyAnnotation) + ")"},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "variables.mark == variables.oldMark",
		Message:    "only the cleanup operator sets or removes the label " + v1alpha1.DeletionProtectedLabel,
		MessageExpression: "'ManagedCluster ' + object.metadata.name + ': only the cleanup operator sets or removes the label " +
			v1alpha1.DeletionProtectedLabel + " (from spec.deletionProtection of the CleanupPolicy that governs the cluster); " +
			"to delete a protected cluster, confirm with kubectl cleanup confirm-delete ' + object.metadata.name",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression: "variables.accepted == '' || variables.accepted == variables.oldAccepted",
		Message:    "only the cleanup operator writes the annotation " + v1alpha1.DeleteConfirmationAcceptedAnnotation,
		MessageExpression: "'ManagedCluster ' + object.metadata.name + ': only the cleanup operator writes the annotation " +
			v1alpha1.DeleteConfirmationAcceptedAnnotation + ", once it has seen a confirmation; confirm with kubectl cleanup confirm-delete ' + object.metadata.name",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}, pinValidation(), outcomeValidation(), finalizerValidation()}
	return p
}

// finalizerValidation refuses the removal of the operator's finalizer from
// a cluster being deleted: the teardown ends by removing it, and a removal
// by anyone else would end it there, past its hooks, budget, orphaning and
// record. On a live cluster the operator puts it back.
func finalizerValidation() admissionregistrationv1.Validation {
	f := strconv.Quote(v1alpha1.ClusterCleanupFinalizer)
	return admissionregistrationv1.Validation{
		Expression: "oldObject == null || !has(oldObject.metadata.deletionTimestamp) || !has(oldObject.metadata.finalizers) || " +
			"!(" + f + " in oldObject.metadata.finalizers) || (has(object.metadata.finalizers) && " + f + " in object.metadata.finalizers)",
		Message: "only the cleanup operator removes the finalizer " + v1alpha1.ClusterCleanupFinalizer + " from a ManagedCluster being deleted",
		MessageExpression: "'ManagedCluster ' + object.metadata.name + ': only the cleanup operator removes the finalizer " +
			v1alpha1.ClusterCleanupFinalizer + " from a cluster being deleted: its teardown ends by removing it " +
			"(kubectl cleanup status ' + object.metadata.name + ' says what it waits for)'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}
}

// OutcomeAnnotations are the annotations in which the operator keeps, on a
// ManagedCluster being torn down, what its teardown forced and orphaned
// unconfirmed: the teardown's outcome, its record and its Events are read
// from them, so only the operator writes them.
var OutcomeAnnotations = []string{v1alpha1.ForcedObjectsAnnotation, v1alpha1.ForcingAnnotation, v1alpha1.UnconfirmedOrphansAnnotation}

// outcomeValidation refuses a request that sets, changes or removes one of
// OutcomeAnnotations.
func outcomeValidation() admissionregistrationv1.Validation {
	keys := make([]string, len(OutcomeAnnotations))
	for i, k := range OutcomeAnnotations {
		keys[i] = strconv.Quote(k)
	}
	value := func(obj string) string {
		return "(" + obj + " != null && has(" + obj + ".metadata.annotations) && k in " + obj + ".metadata.annotations ? " +
			obj + ".metadata.annotations[k] : '')"
	}
	list := "[" + strings.Join(keys, ", ") + "]"
	return admissionregistrationv1.Validation{
		Expression: list + ".all(k, " + value("object") + " == " + value("oldObject") + ")",
		Message:    "only the cleanup operator sets, changes or removes the annotations " + strings.Join(OutcomeAnnotations, ", "),
		MessageExpression: "'ManagedCluster ' + object.metadata.name + ': only the cleanup operator sets, changes or removes the annotation ' + " +
			list + ".filter(k, " + value("object") + " != " + value("oldObject") + ")[0] + " +
			"': it records what the teardown of the cluster forced or deleted unconfirmed, which its outcome and record report'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}
}

// pinValidation refuses a change of the pin: set on a new cluster, or
// set, changed or removed on an existing one. An empty value counts as
// none, as decision.Pinned reads it.
func pinValidation() admissionregistrationv1.Validation {
	return admissionregistrationv1.Validation{
		Expression: "variables.pin == variables.oldPin",
		Message: "only the cleanup operator sets, changes or removes the annotation " + v1alpha1.GoverningPolicyAnnotation +
			": the operator writes it, naming the CleanupPolicy that governs the cluster",
		MessageExpression: "'ManagedCluster ' + object.metadata.name + ': only the cleanup operator sets, changes or removes the annotation " +
			v1alpha1.GoverningPolicyAnnotation + " (' + (variables.oldPin == '' ? 'none' : variables.oldPin) + ' to ' + " +
			"(variables.pin == '' ? 'none' : variables.pin) + '): the operator writes it, naming the CleanupPolicy that governs " +
			"the cluster and that tears it down when it is deleted; which policy governs a cluster follows from the " +
			"clusterSelector and priority of the CleanupPolicies'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}
}

// protectedNamespacePolicy refuses DELETE of the namespace named after a
// protected ManagedCluster unless the cluster carries an accepted
// confirmation: deleting the namespace would take every work and add-on of
// the cluster with it, past the teardown's holds (hooks, pause, blast
// radius) and orphaning, even while the cluster is being deleted. It keys on the namespace's name
// alone, never on a label a namespace admin could remove first. The
// protected clusters are its parameters (the binding selects them by the
// label only the operator writes), so the API server checks each; the
// operator's own deletes pass.
func protectedNamespacePolicy(operatorUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(ProtectedNamespacePolicy)
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "cluster.open-cluster-management.io/v1", Kind: "ManagedCluster"}
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule(admissionregistrationv1.Delete, "", "v1", "namespaces")},
	}
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{notOperator(operatorUser)}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "confirmed", Expression: annotation("params", v1alpha1.DeleteConfirmedAnnotation)},
		{Name: "confirmedAt", Expression: annotation("params", v1alpha1.DeleteConfirmedAtAnnotation)},
		{Name: "accepted", Expression: annotation("params", v1alpha1.DeleteConfirmationAcceptedAnnotation)},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "params.metadata.name != oldObject.metadata.name || " +
			"(variables.confirmed == params.metadata.name && variables.confirmedAt != '' && variables.accepted == variables.confirmedAt)",
		Message: "the namespace belongs to a ManagedCluster protected from deletion: confirm the cluster's deletion first",
		MessageExpression: "'namespace ' + oldObject.metadata.name + ' belongs to ManagedCluster ' + params.metadata.name + " +
			"', which is protected from deletion (label " + v1alpha1.DeletionProtectedLabel + "=true): deleting it would take every work " +
			"and add-on of the cluster; confirm the cluster\\'s deletion first with ' + " + confirmHowTo,
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}

// protectedNamespaceBinding binds the policy to every protected cluster as
// a parameter; with none, nothing is refused.
func protectedNamespaceBinding() *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	b := binding(ProtectedNamespacePolicy)
	b.Spec.ParamRef = &admissionregistrationv1.ParamRef{
		Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.DeletionProtectedLabel: "true"}},
		ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction),
	}
	return b
}

// label is a CEL expression for the value of a label of obj, or ” when it
// has none.
func label(obj, key string) string {
	return "has(" + obj + ".metadata.labels) && '" + key + "' in " + obj + ".metadata.labels ? " + obj + ".metadata.labels['" + key + "'] : ''"
}

// teardownConditionPolicy refuses anyone but the operator a status write
// that sets, changes or removes a ManagedCluster's ContentDeleteSuccess
// condition. The blast radius reads it as the operator's own report (a
// teardown begun, held by the budget, ended), so whoever may write the
// cluster's status (its agent, a status helper) could otherwise let a
// teardown past the budget. Every other condition, OCM's included, is
// written as before: OCM's controllers patch the status at the
// resourceVersion they read, so they never write back an older copy of it.
func teardownConditionPolicy(operatorUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(TeardownConditionPolicy)
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			rule(admissionregistrationv1.Update, "cluster.open-cluster-management.io", "v1", "managedclusters/status"),
		},
	}
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{notOperator(operatorUser)}
	of := func(obj string) string {
		return "has(" + obj + ".status) && has(" + obj + ".status.conditions) ? " + obj + ".status.conditions.filter(c, c.type == '" +
			v1alpha1.ContentDeleteSuccessCondition + "') : []"
	}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "condition", Expression: of("object")},
		{Name: "oldCondition", Expression: of("oldObject")},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "variables.condition == variables.oldCondition",
		Message:    "only the cleanup operator writes the condition " + v1alpha1.ContentDeleteSuccessCondition + " of a ManagedCluster",
		MessageExpression: "'ManagedCluster ' + object.metadata.name + ': only the cleanup operator sets, changes or removes the condition " +
			v1alpha1.ContentDeleteSuccessCondition + ": it reports the cluster\\'s teardown, and the blast radius of its CleanupPolicy reads it; " +
			"write every other condition as before'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}

// workOwnerPolicy refuses anyone but the operator a create or update of a
// ManifestWork that gives it the operator's managed-by label, or changes or
// removes it, or changes the signal label of a work that carries it. The
// managed-by label's key is a common one: its other values (Helm's, say)
// are anyone's. A status write cannot change a work's labels.
func workOwnerPolicy(operatorUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(WorkOwnerPolicy)
	p.Spec.MatchConstraints = writes("work.open-cluster-management.io", "v1", "manifestworks")
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{notOperator(operatorUser)}
	owned := func(obj string) string {
		return obj + " != null && (" + label(obj, v1alpha1.ManagedByLabel) + ") == '" + v1alpha1.ManagedBy + "'"
	}
	signal := func(obj string) string {
		return obj + " == null ? '' : (" + label(obj, v1alpha1.SignalWorkLabel) + ")"
	}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "owned", Expression: owned("object")},
		{Name: "wasOwned", Expression: owned("oldObject")},
		{Name: "signal", Expression: signal("object")},
		{Name: "wasSignal", Expression: signal("oldObject")},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "variables.owned == variables.wasOwned",
		Message: "only the cleanup operator gives a ManifestWork the label " + v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedBy +
			", changes it or removes it",
		MessageExpression: "'ManifestWork ' + object.metadata.namespace + '/' + object.metadata.name + ': only the cleanup operator gives a " +
			"ManifestWork the label " + v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedBy + ", changes it or removes it: it makes the work " +
			"the operator\\'s own, which the operator changes and deletes'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression: "!variables.wasOwned || variables.signal == variables.wasSignal",
		Message:    "only the cleanup operator changes the label " + v1alpha1.SignalWorkLabel + " of a ManifestWork that is its own",
		MessageExpression: "'ManifestWork ' + object.metadata.namespace + '/' + object.metadata.name + ': only the cleanup operator changes the label " +
			v1alpha1.SignalWorkLabel + " of a ManifestWork that is its own: it tells the operator\\'s deletion-signal work from its other works'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}
