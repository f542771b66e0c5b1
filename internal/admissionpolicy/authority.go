package admissionpolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// AuthorityPolicy refuses to create a CleanupPolicy, to change its spec,
// to delete it, or to remove its in-use finalizer, unless the requesting
// user holds every right the policy has the operator exercise: a policy
// exercises only rights its author holds, and whoever may not write what
// a policy does may not drop it either (deleting a policy releases its
// clusters: their protection, finalizer and pin go).
const AuthorityPolicy = "cleanup-operator-policy-authority"

// MaxCheckedRights is how many distinct rights the authority policy asks
// the authorizer about for one request. Each check costs 350,000 of the
// 10,000,000 CEL cost budget of a binding, and one goes to asking whether
// the user may do everything; a policy that needs more is refused unless
// the user may.
const MaxCheckedRights = 24

// maxNeeds bounds the list of rights a policy can need before duplicates
// are dropped: three per stage, one per monitored resource, nine more; on
// UPDATE, as many again for the policy as stored.
const maxNeeds = 2 * (3*32 + 32 + 9)

// The rights a policy needs, one entry [verb, group, resource, why] each:
//   - each deletion stage (absent: the default stages, add-ons then works):
//     delete and list of its resource in every namespace, as the operator
//     lists and deletes it in every governed cluster namespace;
//   - with a BestEffort or Needless strategy anywhere in removeStrategy,
//     patch of each stage's resource too: forcing removes the work agent's
//     finalizer with a patch, which lets an object go without the agent
//     cleaning up what it put on the managed cluster;
//   - with a Needless strategy anywhere, or orphaning rules, patch of
//     manifestworks: the operator stamps spec.deleteOption on the works it
//     orphans; orphaning rules read every work and its manifests, so list
//     of manifestworks too;
//   - each monitored resource: list, the only right the operator uses on it;
//   - a deletion signal: create of manifestworks;
//   - keepNamespace other than the literal "true": delete of namespaces;
//   - prune rules, or a prune default other than None: patch of
//     configurationpolicies, and list of them, which the rules read;
//   - always, patch and list of managedclusters: the operator labels,
//     annotates and holds with its finalizer every cluster a policy
//     governs, and adds or removes deletion protection by
//     spec.deletionProtection, so even a policy without protection removes
//     it from a cluster it takes over; the selector reads every cluster,
//     and the policy's status counts those it matches.
//
// The policy read is the one written, or on DELETE the one deleted; on
// UPDATE the policy as stored is read too: a change needs the rights of
// the policy it replaces as well as of the one it makes, so that no one
// narrows a policy's stages, protection or orphaning away (and then drops
// it) without the rights they had the operator exercise.
var authorityVariables = []admissionregistrationv1.Variable{
	{Name: "policy", Expression: "request.operation == 'DELETE' ? oldObject : object"},
	{Name: "all", Expression: "authorizer.group('*').resource('*').check('*').allowed()"},
	{Name: "needs", Expression: needsOf("variables.policy.spec", "") + " + (request.operation == 'UPDATE' ? " +
		needsOf("oldObject.spec", ", as the policy stood before this change") + " : [])"},
	{Name: "rights", Expression: "variables.needs.map(n, n[0] + ' ' + n[1] + ' ' + n[2])"},
	// The index of the first entry of each distinct right.
	{Name: "firsts", Expression: indexList(maxNeeds) +
		".filter(i, i < size(variables.rights) && variables.rights.indexOf(variables.rights[i]) == i)"},
	// What a delete or a release adds to the refusals.
	{Name: "act", Expression: "request.operation == 'DELETE' ? ', and deleting it is checked as changing it would be' : " +
		"(request.operation == 'UPDATE' && object.spec == oldObject.spec ? ', and removing its finalizer " + v1alpha1.InUseFinalizer +
		" or changing its owners (whose deletion would delete it) is checked as changing it would be' : '')"},
	// The refusal of each distinct right, read only by a failed check.
	{Name: "refusals", Expression: "variables.firsts.map(i, variables.needs[i]).map(n, " +
		"'CleanupPolicy ' + variables.policy.metadata.name + ': the requesting user may not ' + n[0] + ' ' + n[2] + (n[1] == '' ? '' : '.' + n[1]) + " +
		"' in every namespace (verb ' + n[0] + ', group \"' + n[1] + '\", resource ' + n[2] + '), which ' + n[3] + " +
		"' has the cleanup operator do: a policy exercises only rights its author holds' + variables.act)"},
}

// needsOf is a CEL expression for the rights the policy spec (a CEL
// expression) needs, one entry [verb, group, resource, why] each, why
// ending with suffix.
func needsOf(spec, suffix string) string {
	stages := "(has(" + spec + ".deletionStages) && size(" + spec + ".deletionStages) > 0 ? " +
		spec + ".deletionStages.map(s, [has(s.group) ? string(s.group) : '', string(s.resource), 'spec.deletionStages (stage ' + string(s.name) + ')']) : " +
		"[['addon.open-cluster-management.io', 'managedclusteraddons', 'spec.deletionStages (absent: the default stages)'], " +
		"['work.open-cluster-management.io', 'manifestworks', 'spec.deletionStages (absent: the default stages)']])"
	forces := "(" + spec + ".removeStrategy.default != 'Required' || " +
		"(has(" + spec + ".removeStrategy.rules) && " + spec + ".removeStrategy.rules.exists(r, r.strategy != 'Required')))"
	needless := "(" + spec + ".removeStrategy.default == 'Needless' || " +
		"(has(" + spec + ".removeStrategy.rules) && " + spec + ".removeStrategy.rules.exists(r, r.strategy == 'Needless')))"
	orphans := "(has(" + spec + ".orphaning) && size(" + spec + ".orphaning) > 0)"
	prunes := "(has(" + spec + ".prune) && " +
		"((has(" + spec + ".prune.rules) && size(" + spec + ".prune.rules) > 0) || " +
		"(has(" + spec + ".prune.default) && " + spec + ".prune.default != 'None')))"
	q := "'" + suffix + "'"
	return "(" + strings.Join([]string{
		stages + ".map(s, ['delete', s[0], s[1], s[2] + " + q + "])",
		stages + ".map(s, ['list', s[0], s[1], s[2] + " + q + "])",
		"(" + forces + " ? " + stages + ".map(s, ['patch', s[0], s[1], s[2] + ' with a BestEffort or Needless strategy in spec.removeStrategy, which removes finalizers' + " + q + "]) : [])",
		"(" + orphans + " ? [['patch', 'work.open-cluster-management.io', 'manifestworks', 'spec.orphaning (the operator stamps spec.deleteOption on the works it orphans)' + " + q + "], " +
			"['list', 'work.open-cluster-management.io', 'manifestworks', 'spec.orphaning (its rules read every work and its manifests)' + " + q + "]] : [])",
		"(" + needless + " ? [['patch', 'work.open-cluster-management.io', 'manifestworks', 'spec.removeStrategy (Needless orphans every work: the operator stamps spec.deleteOption Orphan)' + " + q + "]] : [])",
		"(has(" + spec + ".monitoredResources) ? " + spec + ".monitoredResources.map(m, ['list', has(m.group) ? string(m.group) : '', string(m.resource), 'spec.monitoredResources' + " + q + "]) : [])",
		"(has(" + spec + ".deletionSignal) ? [['create', 'work.open-cluster-management.io', 'manifestworks', 'spec.deletionSignal' + " + q + "]] : [])",
		"(!has(" + spec + ".keepNamespace) || " + spec + ".keepNamespace != 'true' ? [['delete', '', 'namespaces', 'spec.keepNamespace (anything but \"true\" lets cluster namespaces be deleted)' + " + q + "]] : [])",
		"(" + prunes + " ? [['patch', 'policy.open-cluster-management.io', 'configurationpolicies', 'spec.prune' + " + q + "], " +
			"['list', 'policy.open-cluster-management.io', 'configurationpolicies', 'spec.prune (its rules read the ConfigurationPolicies)' + " + q + "]] : [])",
		"[['patch', 'cluster.open-cluster-management.io', 'managedclusters', 'spec (every governed cluster is labelled and annotated, and spec.deletionProtection adds or removes its protection)' + " + q + "], " +
			"['list', 'cluster.open-cluster-management.io', 'managedclusters', 'spec.clusterSelector (it reads every ManagedCluster, and the status counts those it matches)' + " + q + "]]",
	}, " + ") + ")"
}

// owners is a CEL expression for the owner references of obj, [] when none.
func owners(obj string) string {
	return "(has(" + obj + ".metadata.ownerReferences) ? " + obj + ".metadata.ownerReferences : [])"
}

// indexList is a CEL list literal of 0 to n-1: CEL before Kubernetes 1.34
// has no lists.range.
func indexList(n int) string {
	idx := make([]string, n)
	for i := range idx {
		idx[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(idx, ", ") + "]"
}

// authorityPolicy is rendered for the user the operator authenticates as,
// which removes the in-use finalizer of a policy whose teardowns ended.
func authorityPolicy(operatorUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := policy(AuthorityPolicy)
	p.Spec.MatchConstraints = writes(v1alpha1.GroupVersion.Group, "*", "cleanuppolicies")
	r := &p.Spec.MatchConstraints.ResourceRules[0]
	r.Operations = append(r.Operations, admissionregistrationv1.Delete)
	// Every create, delete and change of the spec: whether a change narrows
	// what a policy does is not decidable here (a new `when`, selector or
	// priority can reach more). The removal of the in-use finalizer by
	// anyone but the operator: it lets a policy being deleted go before its
	// teardowns end. And a change of its owners: the garbage collector
	// deletes a policy whose owner is gone, with rights of its own. Labels,
	// annotations and other finalizers change freely.
	inUse := func(obj string) string {
		return "(has(" + obj + ".metadata.finalizers) && '" + v1alpha1.InUseFinalizer + "' in " + obj + ".metadata.finalizers)"
	}
	p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name: "created-deleted-spec-or-owners-changed-or-released",
		Expression: "request.operation != 'UPDATE' || !has(oldObject.spec) || !has(object.spec) || object.spec != oldObject.spec || " +
			owners("object") + " != " + owners("oldObject") + " || " +
			"(" + inUse("oldObject") + " && !" + inUse("object") + " && request.userInfo.username != " + strconv.Quote(operatorUser) + ")",
	}}
	p.Spec.Variables = slices.Clone(authorityVariables)
	p.Spec.Validations = append([]admissionregistrationv1.Validation{{
		// An owner would have the garbage collector delete the policy with
		// rights of its own, whoever deletes the owner: only a user who may
		// do everything gives a policy one.
		Expression: "variables.all || request.operation == 'DELETE' || " + owners("object") + " == " +
			"(request.operation == 'UPDATE' ? " + owners("oldObject") + " : [])",
		Message: "only a user who may do everything gives a CleanupPolicy owner references",
		MessageExpression: "'CleanupPolicy ' + variables.policy.metadata.name + ': only a user who may do everything sets or changes its " +
			"metadata.ownerReferences: the garbage collector would delete the policy, and release the clusters it governs, when an owner goes'",
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}, {
		Expression: fmt.Sprintf("variables.all || size(variables.firsts) <= %d", MaxCheckedRights),
		Message:    "the CleanupPolicy needs more distinct rights checked than admission can check for a user who may not do everything",
		MessageExpression: fmt.Sprintf("'CleanupPolicy ' + variables.policy.metadata.name + ' needs ' + string(size(variables.firsts)) + "+
			"' distinct rights (verb, group, resource)' + (request.operation == 'UPDATE' ? ' (a change needs the rights of the policy as it stood and as it becomes)' : '') + "+
			"', and admission checks at most %d for a user who may not do everything: "+
			"use fewer distinct resources in spec.deletionStages and spec.monitoredResources, make a change in smaller steps, or have a fleet administrator write it'", MaxCheckedRights),
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}}, rightChecks()...)
	return p
}

// rightChecks asks the authorizer about each distinct right, one per
// validation: the API server allows two checks per expression. A user who
// may do everything is asked nothing more, and their spec is not read.
func rightChecks() []admissionregistrationv1.Validation {
	out := make([]admissionregistrationv1.Validation, MaxCheckedRights)
	for k := range out {
		n := fmt.Sprintf("variables.needs[variables.firsts[%d]]", k)
		out[k] = admissionregistrationv1.Validation{
			Expression: fmt.Sprintf("variables.all || size(variables.firsts) <= %d || "+
				"authorizer.group(%[2]s[1]).resource(%[2]s[2]).check(%[2]s[0]).allowed()", k, n),
			Message:           "the requesting user lacks a right this CleanupPolicy has the cleanup operator exercise",
			MessageExpression: fmt.Sprintf("variables.refusals[%d]", k),
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		}
	}
	return out
}
