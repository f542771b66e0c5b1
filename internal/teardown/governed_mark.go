package teardown

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// The mark of a governed cluster's namespace (v1alpha1.GovernedNamespaceLabel
// and the policy's name) holds OCM's own cleanup at admission, so that the
// policy's teardown alone decides when and in which order the cluster's
// add-ons and works go. Governance writes it while a policy governs the
// cluster, before any deletion; the teardown keeps it and takes it off at
// its end, with the cluster-deleting label.

// markOf is the mark a namespace should carry for policy: none for "".
func markOf(policy string) namespaceMarks {
	if policy == "" {
		return namespaceMarks{labels: map[string]any{v1alpha1.GovernedNamespaceLabel: nil},
			annotations: map[string]any{v1alpha1.GoverningPolicyAnnotation: nil}}
	}
	return namespaceMarks{labels: map[string]any{v1alpha1.GovernedNamespaceLabel: "true"},
		annotations: map[string]any{v1alpha1.GoverningPolicyAnnotation: policy}}
}

// HeldBy is the policy whose mark a cluster it governs carries: none in
// dry run.
func HeldBy(p *cel.Policy) string {
	if p.Spec.DryRun {
		return ""
	}
	return p.Name
}

// MarkNamespace gives the namespace (nil: none) of a cluster not being
// deleted the mark of policy, or takes it off for "" (no policy governs
// the cluster, or its policy is in dry run, which changes nothing OCM
// does), and says whether the namespace carries what it should: a
// namespace changed meanwhile is not written, and its event brings the
// cluster back. A namespace not there yet is marked on its creation's
// event. The mark is taken off only after a fresh read says the cluster is
// still not being deleted: a teardown begun since relies on it.
func (a *ClusterWriter) MarkNamespace(ctx context.Context, ns *corev1.Namespace, policy string) (bool, error) {
	switch {
	case ns == nil || ns.DeletionTimestamp != nil:
		return true, nil
	case policy != "":
		if decision.Marked(ns) == policy {
			return true, nil
		}
	case !decision.HasMark(ns):
		return true, nil
	default:
		if deleting, err := a.DeletingNow(ctx, ns.Name); err != nil || deleting {
			return true, err
		}
	}
	return a.writeMark(ctx, ns, policy)
}

// writeMark writes the mark of policy on the namespace as it was read, and
// says whether it did.
func (a *ClusterWriter) writeMark(ctx context.Context, ns *corev1.Namespace, policy string) (bool, error) {
	verb := "marked governed by " + policy
	if policy == "" {
		verb = "unmarked"
	}
	return a.patchNamespace(ctx, ns.Name, ns.UID, ns.ResourceVersion, markOf(policy), verb)
}

// unmark takes the mark off the namespace of a cluster being deleted that
// no teardown of the operator's holds (it lost or never had the finalizer):
// OCM cleans it, as it would without the operator.
func (a *ClusterTeardown) unmark(ctx context.Context, name string) error {
	ns, err := a.ClusterNamespace(ctx, name)
	if err != nil || ns == nil || ns.DeletionTimestamp != nil || !decision.HasMark(ns) {
		return err
	}
	_, err = a.writeMark(ctx, ns, "")
	return err
}

// keepMark marks the namespace of a cluster whose teardown its policy runs
// (not in dry run, not held, not suspended) when it is not marked yet: the
// cluster was deleted before governance marked it.
func (a *ClusterTeardown) keepMark(ctx context.Context, s *decision.Snapshot, plan *decision.Plan) error {
	ns := s.Namespace
	if plan.Policy == "" || plan.DryRun || plan.Held != "" || plan.Suspended != "" ||
		ns == nil || ns.Name != plan.Cluster || ns.DeletionTimestamp != nil || decision.Marked(ns) == plan.Policy {
		return nil
	}
	if next := plan.Next(); next == nil || next.Kind == decision.StepFinish {
		return nil
	}
	_, err := a.writeMark(ctx, ns, plan.Policy)
	return err
}
