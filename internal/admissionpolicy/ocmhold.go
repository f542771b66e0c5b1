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

// The policies by which the operator coexists with OCM's own cleanup (the
// registration hub's ResourceCleanup feature), which deletes a deleted
// cluster's add-ons and works as soon as it is deleted.
const (
	// OCMCleanupHoldPolicy refuses OCM's cleanup the DELETE of add-ons and
	// works in the namespace of a cluster a policy governs (marked
	// v1alpha1.GovernedNamespaceLabel): the policy's teardown deletes them,
	// after its gates and in its order. OCM retries, and finds none once
	// the teardown has deleted them.
	OCMCleanupHoldPolicy = "cleanup-operator-ocm-cleanup-hold"
	// GovernedNamespacePolicy lets only the operator set, change or remove
	// the mark on a namespace: no one else can stall OCM's cleanup of a
	// cluster, or let it race a teardown.
	GovernedNamespacePolicy = "cleanup-operator-governed-namespace"
)

// DefaultOCMCleanupUsers are the users OCM's cleanup deletes as: the
// registration controller's service account, where OCM's cluster manager
// and ACM install the hub (namespace open-cluster-management-hub).
var DefaultOCMCleanupUsers = []string{"system:serviceaccount:open-cluster-management-hub:registration-controller-sa"}

// OCMCleanupObjects returns the policy that holds OCM's cleanup, as the
// users (none: it holds nothing), and its binding.
func OCMCleanupObjects(users []string) []client.Object {
	return []client.Object{ocmCleanupHoldPolicy(users), binding(OCMCleanupHoldPolicy)}
}

func ocmCleanupHoldPolicy(users []string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(OCMCleanupHoldPolicy)
	p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{
		// For a namespaced request the selector reads its namespace.
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.GovernedNamespaceLabel: "true"}},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			rule(admissionregistrationv1.Delete, "work.open-cluster-management.io", "v1", "manifestworks"),
			rule(admissionregistrationv1.Delete, "addon.open-cluster-management.io", "v1alpha1", "managedclusteraddons"),
		},
	}
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "ocm-cleanup",
		Expression: "request.userInfo.username in [" + strings.Join(quoted, ", ") + "]",
	}}
	p.Spec.Variables = []admissionregistrationv1.Variable{{
		Name: "policy",
		Expression: "namespaceObject != null && has(namespaceObject.metadata.annotations) && '" + v1alpha1.GoverningPolicyAnnotation +
			"' in namespaceObject.metadata.annotations ? namespaceObject.metadata.annotations['" + v1alpha1.GoverningPolicyAnnotation + "'] : ''",
	}}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "false",
		Message:    "the cluster is governed by a CleanupPolicy: its teardown deletes its add-ons and works in its own order when the cluster is deleted",
		MessageExpression: "'cluster ' + request.namespace + ' is governed by CleanupPolicy ' + variables.policy + " +
			"': its teardown deletes its add-ons and works in its own order when the cluster is deleted; " +
			"OCM\\'s resource cleanup waits for it (kubectl cleanup status ' + request.namespace + ')'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}

// governedNamespacePolicy refuses anyone but the operator a request that
// sets, changes or removes the mark on a namespace: the label or the
// policy's name.
func governedNamespacePolicy(operatorUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(GovernedNamespacePolicy)
	// The status and finalize subresources of a namespace write its
	// metadata too.
	p.Spec.MatchConstraints = writes("", "v1", "namespaces")
	p.Spec.MatchConstraints.ResourceRules = append(p.Spec.MatchConstraints.ResourceRules,
		rule(admissionregistrationv1.Update, "", "v1", "namespaces/status"), rule(admissionregistrationv1.Update, "", "v1", "namespaces/finalize"))
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{notOperator(operatorUser)}
	of := func(obj string) string {
		return "(" + obj + " == null ? ['', ''] : [" + label(obj, v1alpha1.GovernedNamespaceLabel) + ", " +
			annotation(obj, v1alpha1.GoverningPolicyAnnotation) + "])"
	}
	p.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "mark", Expression: of("object")},
		{Name: "oldMark", Expression: of("oldObject")},
	}
	p.Spec.Validations = []admissionregistrationv1.Validation{{
		Expression: "variables.mark == variables.oldMark",
		Message: "only the cleanup operator sets, changes or removes the label " + v1alpha1.GovernedNamespaceLabel +
			" and the annotation " + v1alpha1.GoverningPolicyAnnotation + " of a namespace",
		MessageExpression: "'namespace ' + object.metadata.name + ': only the cleanup operator sets, changes or removes the label " +
			v1alpha1.GovernedNamespaceLabel + " and the annotation " + v1alpha1.GoverningPolicyAnnotation +
			": they hold OCM\\'s resource cleanup of the cluster while a CleanupPolicy governs it, which the policy\\'s " +
			"clusterSelector and priority decide'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}
	return p
}
