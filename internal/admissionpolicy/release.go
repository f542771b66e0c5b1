package admissionpolicy

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// ReleasePolicy refuses to set or change the blast-radius release of a
// ManagedCluster (v1alpha1.BlastRadiusReleasedAnnotation) unless the
// cluster is being deleted (its pin is then fixed, and the release is of
// that deletion) and the requesting user may release the CleanupPolicy
// that governs it (ReleaseVerb on ReleaseSubresource): a release lets the
// operator exercise the policy's rights on one more cluster, a fleet
// administrator's act granted on purpose, which no right on the policies
// themselves carries, not even every verb on them. Removing the annotation
// is not checked: it releases nothing.
const ReleasePolicy = "cleanup-operator-blast-radius-release"

// ReleaseVerb and ReleaseSubresource are the right a release needs on the
// governing CleanupPolicy: update of cleanuppolicies/release, a resource no
// role grants by accident (neither the editor role nor a rule of every
// verb on cleanuppolicies, as OLM's generated roles have), only a rule that
// names it or every resource.
const (
	ReleaseVerb        = "update"
	ReleaseSubresource = "release"
)

// releaseRight is a CEL expression: whether the requesting user may update
// the CleanupPolicy named by the expression p (every CleanupPolicy when it
// is empty: a cluster that names none).
func releaseRight(p string) string {
	return "authorizer.group('" + v1alpha1.GroupVersion.Group + "').resource('cleanuppolicies').subresource('" + ReleaseSubresource + "').name(" + p +
		").check('" + ReleaseVerb + "').allowed()"
}

// releaseRefusal is the refusal for the policy named by the expression p.
func releaseRefusal(p string) string {
	return "'ManagedCluster ' + object.metadata.name + ': the requesting user may not " + ReleaseVerb + " cleanuppolicies/" + ReleaseSubresource + " of CleanupPolicy ' + " +
		"(" + p + " == '' ? '(any)' : " + p + ") + ' (verb " + ReleaseVerb + ", group \"" + v1alpha1.GroupVersion.Group +
		"\", resource cleanuppolicies/" + ReleaseSubresource + "), which setting the annotation " + v1alpha1.BlastRadiusReleasedAnnotation +
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
		// A release is of a deletion under way: never written ahead of one,
		// where the pin could still move to another policy, or the time
		// reach a deletion that comes after it.
		Expression: "oldObject != null && has(oldObject.metadata.deletionTimestamp)",
		Message:    "a blast-radius release is written on a ManagedCluster being deleted only",
		MessageExpression: "'ManagedCluster ' + object.metadata.name + ': the annotation " + v1alpha1.BlastRadiusReleasedAnnotation +
			" releases a teardown the blast radius holds, and is written on a cluster being deleted only (kubectl cleanup release writes it on the held ones)'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression:        "oldObject == null || " + releaseRight("variables.oldPolicy"),
		Message:           "only a user who may update cleanuppolicies/release of the governing CleanupPolicy may release a teardown its blast radius holds",
		MessageExpression: releaseRefusal("variables.oldPolicy"),
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression:        "(oldObject != null && variables.policy == variables.oldPolicy) || " + releaseRight("variables.policy"),
		Message:           "only a user who may update cleanuppolicies/release of the governing CleanupPolicy may release a teardown its blast radius holds",
		MessageExpression: releaseRefusal("variables.policy"),
		Reason:            ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}
