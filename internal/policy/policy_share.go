package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetops-dev/cleanup-operator/internal/stamp"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// share is one policy's share of the fleet.
type share struct {
	// evaluated counts the clusters evaluated before the budget ran out.
	evaluated         int
	matched, governed int32
	deleting          int32
	// held are the governed teardowns held on something only a person can
	// clear, by their condition's reason; heldCount counts them all.
	held          map[string][]string
	heldCount     int32
	evalErrors    []string
	overlaps      map[string]*v1alpha1.PolicyOverlap
	exhausted     bool
	governedNames sets.Set[string]
}

// shareOf resolves the governor of every cluster, as the cluster's own
// reconciler does (decision.Resolve: the pin of a deleting cluster
// included), and evaluates compiled's selector on each: which clusters it
// matches, governs, and shares with policies of the same priority.
func (r *CleanupPolicyReconciler) shareOf(ctx context.Context, policies *snapshot.Policies, compiled *cel.Policy, clusters []unstructured.Unstructured) *share {
	budget := cel.NewBudget(cel.ReconcileCostBudget)
	s := &share{overlaps: map[string]*v1alpha1.PolicyOverlap{}, governedNames: sets.New[string]()}
	for i := range clusters {
		c := &clusters[i]
		gov := r.Governance.Resolve(ctx, budget, policies.Input(c, false))
		sel := gov.Selection
		if sel == nil {
			// Not decided by the selectors: they still say what matches.
			all := r.Governance.Select(ctx, budget, policies.Ranked, c)
			sel = &all
		}
		err, failed := errorOf(sel, compiled)
		if failed && cel.Transient(err) {
			s.exhausted = true
			break
		}
		s.evaluated++
		if gov.Policy != nil && gov.Policy.UID == compiled.UID {
			s.govern(c)
		}
		if failed {
			s.evalErrors = append(s.evalErrors, fmt.Sprintf("%s: %v", c.GetName(), err))
			continue
		}
		if slices.ContainsFunc(sel.Matched, func(q *cel.Policy) bool { return q.UID == compiled.UID }) {
			s.matched++
			s.overlap(compiled, sel.Matched, c.GetName())
		}
	}
	return s
}

// govern counts a cluster the policy governs.
func (s *share) govern(c *unstructured.Unstructured) {
	s.governed++
	s.governedNames.Insert(c.GetName())
	if c.GetDeletionTimestamp() != nil {
		s.deleting++
		// The condition is the operator's own: admission reserves it.
		if cond := decision.ClusterCondition(c, v1alpha1.ContentDeleteSuccessCondition); cond != nil && slices.Contains(heldReasons, cond.Reason) {
			s.heldCount++
			if s.held == nil {
				s.held = map[string][]string{}
			}
			s.held[cond.Reason] = append(s.held[cond.Reason], c.GetName())
		}
	}
}

// heldReasons are the reasons of a teardown that only a person moves on:
// CleanupFailed (a Required timeout passed, or a hold on an error: a
// forbidden stage, a rule that fails), BlastRadiusExceeded (a release, or a
// budget raised) and DeletedOutOfOrder (someone else deletes what the
// teardown deletes in order: OCM's cleanup not held, or a person).
var heldReasons = []string{v1alpha1.CleanupFailedReason, v1alpha1.BlastRadiusExceededReason, v1alpha1.DeletedOutOfOrderReason}

// heldMessage says which governed teardowns need a person, up to three
// clusters a reason; "" when none does.
func (s *share) heldMessage() string {
	if s.heldCount == 0 {
		return ""
	}
	var parts []string
	for _, reason := range heldReasons {
		names := s.held[reason]
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		part := fmt.Sprintf("%s on %s", reason, strings.Join(names[:min(len(names), maxReported)], ", "))
		if len(names) > maxReported {
			part += fmt.Sprintf(" and %d more", len(names)-maxReported)
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("%d governed teardown(s) are held until a person acts (kubectl cleanup status): %s",
		s.heldCount, strings.Join(parts, "; "))
}

// overlap counts a cluster that compiled shares with the other matched
// policies it ties with: those that only their names rank against it.
func (s *share) overlap(compiled *cel.Policy, matched []*cel.Policy, cluster string) {
	for _, other := range matched {
		if other.UID == compiled.UID || !decision.Tied(other, compiled) {
			continue
		}
		o := s.overlaps[other.Name]
		if o == nil {
			o = &v1alpha1.PolicyOverlap{Policy: other.Name, GovernedBy: min(other.Name, compiled.Name)}
			s.overlaps[other.Name] = o
		}
		o.Clusters++
		if len(o.Examples) < maxReported {
			o.Examples = append(o.Examples, cluster)
		}
	}
}

// errorOf is p's selector error in the selection, if any.
func errorOf(sel *decision.Selection, p *cel.Policy) (error, bool) {
	for q, err := range sel.Errors {
		if q.UID == p.UID {
			return err, true
		}
	}
	return nil, false
}

// reportShare writes the share into the status, with an Event when the
// overlaps change.
func (r *CleanupPolicyReconciler) reportShare(p *v1alpha1.CleanupPolicy, prev *v1alpha1.CleanupPolicyStatus, s *share) {
	p.Status.MatchedClusters = s.matched
	p.Status.GovernedClusters = s.governed
	p.Status.EvaluationErrors = int32(len(s.evalErrors))
	p.Status.ClustersDeleting = s.deleting
	p.Status.ClustersHeld = s.heldCount
	p.Status.Overlaps = sortedOverlaps(s.overlaps)
	if !equality.Semantic.DeepEqual(prev.Overlaps, p.Status.Overlaps) {
		r.reportOverlaps(p)
	}
}

// countStamped counts the objects carrying this policy's decisions, and
// those it could not write.
func (r *CleanupPolicyReconciler) countStamped(ctx context.Context, p *v1alpha1.CleanupPolicy, clusters *unstructured.UnstructuredList,
	governed sets.Set[string], standalone bool) error {
	isCluster := make(sets.Set[string], len(clusters.Items))
	for i := range clusters.Items {
		isCluster.Insert(clusters.Items[i].GetName())
	}
	count := func(gvk schema.GroupVersionKind, annotation string, standaloneToo bool) (int32, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// Read-only: no copy of the cache.
		if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			if meta.IsNoMatchError(err) {
				return 0, nil
			}
			return 0, err
		}
		var n int32
		for i := range list.Items {
			o := &list.Items[i]
			ns := o.GetNamespace()
			if o.GetAnnotations()[annotation] != "" && (governed.Has(ns) || (standaloneToo && !isCluster.Has(ns))) {
				n++
			}
		}
		return n, nil
	}
	var works workv1.ManifestWorkList
	if err := r.List(ctx, &works, client.MatchingFields{watch.OrphaningStampedIndex: "true"}, client.UnsafeDisableDeepCopy); client.IgnoreNotFound(err) != nil && !meta.IsNoMatchError(err) {
		return err
	}
	p.Status.WorksStamped = 0
	for i := range works.Items {
		if w := &works.Items[i]; w.Annotations[v1alpha1.OrphaningAnnotation] != "" && governed.Has(w.Namespace) {
			p.Status.WorksStamped++
		}
	}
	// Read from the cache only while the kind is served: a read of a kind
	// whose CRD is gone would wait for an informer that never syncs.
	p.Status.PoliciesStamped = 0
	if err := r.Optional.WhileOn(cel.ConfigurationPolicyCRD, func() (err error) {
		p.Status.PoliciesStamped, err = count(stamp.ConfigurationPolicyGVK, v1alpha1.PruneAnnotation, standalone)
		return err
	}); err != nil {
		return err
	}
	p.Status.Conflicts = r.Tally.Count(tally.ConflictMark, p.Name)
	p.Status.Contested = r.Tally.Count(tally.ContestedMark, p.Name)
	p.Status.WriteFailed = r.Tally.Count(tally.WriteFailedMark, p.Name)
	p.Status.TemplatesNotReadingDecisions = r.Tally.Count(tally.UnreadMark, p.Name)
	p.Status.DryRunPending = r.Tally.Count(tally.DryRunMark, p.Name)
	p.Status.NotOwned = r.Tally.Count(tally.NotOwnedMark, p.Name)
	return nil
}

// reportOverlaps emits an Event when the policies sharing clusters change.
func (r *CleanupPolicyReconciler) reportOverlaps(p *v1alpha1.CleanupPolicy) {
	if len(p.Status.Overlaps) == 0 {
		return
	}
	var parts []string
	for _, o := range p.Status.Overlaps {
		parts = append(parts, fmt.Sprintf("%s on %d cluster(s), governed by %s", o.Policy, o.Clusters, o.GovernedBy))
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "Overlap", "Evaluate",
		"selects clusters that other policies of priority %d select too: %s", p.Spec.Priority, strings.Join(parts, "; "))
}

func sortedOverlaps(m map[string]*v1alpha1.PolicyOverlap) []v1alpha1.PolicyOverlap {
	out := make([]v1alpha1.PolicyOverlap, 0, len(m))
	for _, o := range m {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b v1alpha1.PolicyOverlap) int { return strings.Compare(a.Policy, b.Policy) })
	if len(out) > 16 {
		out = out[:16]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// sortByName sorts objects by name, each name read once: a fleet pass
// sorts every cluster, and reading a name from an unstructured object at
// each comparison was a third of the pass.
func sortByName(items []unstructured.Unstructured) {
	type named struct {
		name string
		obj  unstructured.Unstructured
	}
	byName := make([]named, len(items))
	for i := range items {
		byName[i] = named{items[i].GetName(), items[i]}
	}
	slices.SortFunc(byName, func(a, b named) int { return strings.Compare(a.name, b.name) })
	for i := range byName {
		items[i] = byName[i].obj
	}
}
