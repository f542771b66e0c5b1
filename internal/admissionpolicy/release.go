package admissionpolicy

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// ReleasePolicy refuses to set or change the blast-radius release of a
// ManagedCluster (v1alpha1.BlastRadiusReleasedAnnotation) unless the
// requesting user may release the CleanupPolicy that governs the cluster
// (ReleaseVerb): a release lets the operator exercise the policy's rights on
// one more cluster, a fleet administrator's act granted on purpose, which
// the right to edit policies does not carry. Removing the annotation is not
// checked: it releases nothing.
const ReleasePolicy = "cleanup-operator-blast-radius-release"

// ReleaseVerb is the right a release needs on the governing CleanupPolicy:
// a verb of its own, which no role grants by accident (the editor role
// does not), only a rule that names it or every verb.
const ReleaseVerb = "release"

// releaseRight is a CEL expression: whether the requesting user may update
// the CleanupPolicy named by the expression p (every CleanupPolicy when it
// is empty: a cluster that names none).
func releaseRight(p string) string {
	return "authorizer.group('" + v1alpha1.GroupVersion.Group + "').resource('cleanuppolicies').name(" + p + ").check('" + ReleaseVerb + "').allowed()"
}

// releaseRefusal is the refusal for the policy named by the expression p.
func releaseRefusal(p string) string {
	return "'ManagedCluster ' + object.metadata.name + ': the requesting user may not " + ReleaseVerb + " CleanupPolicy ' + " +
		"(" + p + " == '' ? '(any)' : " + p + ") + ' (verb " + ReleaseVerb + ", group \"" + v1alpha1.GroupVersion.Group +
		"\", resource cleanuppolicies), which setting the annotation " + v1alpha1.BlastRadiusReleasedAnnotation +
		" requires: releasing a teardown the blast radius holds lets the operator go past the policy\\'s spec.blastRadius, and is granted on purpose'"
}

// releasePolicy checks a request that sets the release annotation, or
// changes it, against the policy governing the cluster before the request
// and, when the request changes that, after it too.
func releasePolicy() *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(ReleasePolicy)
	p.Spec.MatchConstraints = clusterWrites()
	released := annotation("object", v1alpha1.BlastRadiusReleasedAnnotation)
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name: "release-set-or-changed",
		Expression: "(" + released + ") != '' && (oldObject == null || (" +
			annotation("oldObject", v1alpha1.BlastRadiusReleasedAnnotation) + ") != (" + released + "))",
	}}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "policy", Expression: annotation("object", v1alpha1.GoverningPolicyAnnotation)},
		{Name: "oldPolicy", Expression: "oldObject == null ? '' : (" + annotation("oldObject", v1alpha1.GoverningPolicyAnnotation) + ")"},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression:        "oldObject == null || " + releaseRight("variables.oldPolicy"),
		Message:           "only a user who may release the governing CleanupPolicy may release a teardown its blast radius holds",
		MessageExpression: releaseRefusal("variables.oldPolicy"),
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression:        "(oldObject != null && variables.policy == variables.oldPolicy) || " + releaseRight("variables.policy"),
		Message:           "only a user who may release the governing CleanupPolicy may release a teardown its blast radius holds",
		MessageExpression: releaseRefusal("variables.policy"),
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}
