package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	workv1 "open-cluster-management.io/api/work/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// UnconfirmedOrphansAnnotation lists, on a ManagedCluster being cleaned up,
// the ManifestWorks deleted with an orphaning deleteOption that the work
// agent never confirmed (the cluster was unavailable past the timeout). It
// is written before those works are deleted, so the outcome names them
// after a restart too.
const UnconfirmedOrphansAnnotation = "cleanup.fleetops.dev/unconfirmed-orphans"

// teardownOrphaning is the deleteOption a work must carry, and the work
// agent must have applied, before the teardown deletes it
// (decision.TeardownOrphaning). The operator and the preview both call it.
func teardownOrphaning(g *decision.Governed, strategy v1alpha1.RemoveStrategyType, w *workv1.ManifestWork, mapper meta.RESTMapper) (decision.DeleteOption, error) {
	role := decision.NotSignal
	if decision.IsSignalWork(w) {
		role = decision.RetiredSignal
		if w.Name == decision.SignalWorkName(g.Policy) {
			role = decision.CurrentSignal
		}
	}
	return decision.TeardownOrphaning(strategy, role, func() (decision.DeleteOption, error) { return decideOrphaning(g, w, mapper) })
}

// keepsAtLeast says whether a work carrying have leaves on the managed
// cluster everything want would leave: Orphan keeps everything.
func keepsAtLeast(have, want decision.DeleteOption) bool {
	return want.PropagationPolicy == "" || have.PropagationPolicy == string(workv1.DeletePropagationPolicyTypeOrphan) || have.Equal(want)
}

// orphans says whether a work's deleteOption leaves anything on the managed
// cluster when the work is deleted.
func orphans(w *workv1.ManifestWork) bool { return current(w).PropagationPolicy != "" }

// reconcileOrphaning makes every work of the cluster carry the deleteOption
// the teardown requires, and waits until the work agent has applied it,
// before anything is deleted: the agent orphans a work's resources when it
// applies the deleteOption, and deletes what it still owns when the work
// goes first. A work whose decision cannot be made, or whose deleteOption
// another manager owns, holds the cleanup.
func (a *ManagedClusterAdapter) reconcileOrphaning(ctx context.Context, c *cleanup) (step, error) {
	var stamped, pending []decision.Object
	var held []string
	for _, o := range c.objects[decision.ManifestWorks] {
		w := c.works[o.Meta.UID]
		if w == nil || w.DeletionTimestamp != nil {
			continue
		}
		if w.Generation < a.inflight.stamped(w.UID) {
			pending = append(pending, o) // stamped; the cache has not caught up yet
			continue
		}
		want, err := teardownOrphaning(c.g, c.strategy, w, a.Mapper)
		if err != nil {
			held = append(held, fmt.Sprintf("%s: %v", o.Key(), err))
			continue
		}
		if have := current(w); !keepsAtLeast(have, want) {
			if c.dryRun {
				c.plan = append(c.plan, fmt.Sprintf("would set %s deleteOption %s", o.Key(), describe(want)))
				continue
			}
			if a.inflight.restamps(w.UID) > maxReapplies {
				held = append(held, fmt.Sprintf("%s: another manager keeps reverting spec.deleteOption (now %s); the policy requires %s",
					o.Key(), describe(have), describe(want)))
				continue
			}
			result, why, err := a.stampDeleteOption(ctx, &o.Meta.ObjectMeta, want)
			switch {
			case err != nil:
				held = append(held, fmt.Sprintf("%s: setting spec.deleteOption %s failed: %v", o.Key(), describe(want), err))
			case result == stampConflict:
				held = append(held, fmt.Sprintf("%s: another manager owns spec.deleteOption (%s: %s); the policy requires %s",
					o.Key(), describe(have), why, describe(want)))
			case result == stampStale:
				pending = append(pending, o) // replaced or changed meanwhile: its event brings the cluster back
			default:
				stamped = append(stamped, o)
			}
			continue
		}
		if orphans(w) && !a.orphanApplied(w) {
			pending = append(pending, o)
		}
	}
	if c.dryRun {
		if len(pending) > 0 {
			c.plan = append(c.plan, fmt.Sprintf("would wait for the work agent to apply the deleteOption of %d ManifestWork(s)", len(pending)))
		}
		if len(held) > 0 {
			c.plan = append(c.plan, "would hold: "+strings.Join(bounded(held), "; "))
		}
		return step{done: true}, nil
	}
	if len(held) > 0 {
		return step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason, message: fmt.Sprintf(
			"held, nothing more is deleted: the deleteOption of %d ManifestWork(s) cannot be decided or written: %s",
			len(held), strings.Join(bounded(held), "; "))}, nil
	}
	if len(stamped)+len(pending) == 0 {
		return step{done: true}, nil
	}
	return a.awaitOrphans(ctx, c, stamped, pending)
}

// awaitOrphans waits for the work agent to apply the deleteOptions. While
// the cluster is Available the agent is there to confirm them, and nothing
// is deleted unconfirmed, however long it takes; past the timeout that is
// reported as CleanupFailed. An unavailable cluster's works wait until the
// timeout; then Required keeps waiting, and BestEffort and Needless go on,
// recording each work whose orphan the agent never confirmed.
func (a *ManagedClusterAdapter) awaitOrphans(ctx context.Context, c *cleanup, stamped, pending []decision.Object) (step, error) {
	waiting := append(slices.Clone(stamped), pending...)
	msg := fmt.Sprintf("%s: waiting for the work agent to apply the orphaning deleteOption of %d ManifestWork(s) before they are deleted: %s",
		c.strategy, len(waiting), decision.Names(waiting, maxNamed))
	switch {
	case !c.pastDeadline():
		s := step{reason: v1alpha1.OrphaningReason, message: msg, requeue: c.deadline.Sub(c.now)}
		if len(stamped) > 0 {
			s.event = v1alpha1.OrphaningReason
		}
		return s, nil
	case len(stamped) > 0:
		// Just stamped: the stamp's event brings the cluster back.
		return step{reason: v1alpha1.OrphaningReason, message: msg}, nil
	case c.available || c.strategy == v1alpha1.RemoveStrategyRequired:
		why := "the cluster is Available, so nothing is deleted before its agent confirms"
		if !c.available {
			why = "Required never deletes a work whose orphan the agent has not confirmed"
		}
		return step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason,
			message: fmt.Sprintf("%s; the %s timeout passed and %s", msg, c.strategy, why)}, nil
	}
	return step{done: true}, a.recordUnconfirmed(ctx, c, pending)
}

// recordUnconfirmed writes the works about to be deleted with an orphan
// the agent never confirmed on the cluster, before they are deleted, and
// reports each once (Event, metric).
func (a *ManagedClusterAdapter) recordUnconfirmed(ctx context.Context, c *cleanup, works []decision.Object) error {
	recorded := unconfirmedOrphans(c.mc)
	var added []string
	for _, w := range works {
		if !recorded.Has(w.Key()) {
			recorded.Insert(w.Key())
			added = append(added, w.Key())
		}
	}
	if len(added) == 0 {
		return nil
	}
	before := c.mc.DeepCopy()
	setAnnotation(c.mc, UnconfirmedOrphansAnnotation, strings.Join(sets.List(recorded), ","))
	// On the cluster as read: a record written meanwhile is not lost.
	if err := a.Client.Patch(ctx, c.mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the unconfirmed orphans of %s: %w", c.mc.GetName(), err)
	}
	a.Metrics.UnconfirmedOrphans.Add(float64(len(added)))
	a.Recorder.Eventf(c.mc, nil, corev1.EventTypeWarning, v1alpha1.OrphanNotConfirmedReason, eventAction("Orphan/"+added[0]),
		"orphan not confirmed by the agent: %s (%s: the timeout passed and the cluster is unavailable; an agent that returns may delete their resources)",
		strings.Join(added, ", "), c.strategy)
	return nil
}

func unconfirmedOrphans(mc metav1.Object) sets.Set[string] {
	s := sets.New[string]()
	if v := mc.GetAnnotations()[UnconfirmedOrphansAnnotation]; v != "" {
		s.Insert(strings.Split(v, ",")...)
	}
	return s
}

// stampResult is what became of a stamp.
type stampResult int

const (
	stampWritten  stampResult = iota
	stampConflict             // another field manager owns deleteOption
	stampStale                // the work was replaced, changed or deleted meanwhile
)

// stampDeleteOption gives a work the deleteOption want and remembers the
// generation that carries it. The operator's own signal works get a merge
// patch: it owns their whole spec, and an apply of deleteOption alone would
// drop the fields it applied before, the manifests among them. Other works
// get a server-side apply of deleteOption and the annotation recording the
// decision, never forced unless another manager holds only the CRD's
// default propagationPolicy, which it never wrote (see takeDefault); why
// says who holds it otherwise. Both carry the UID: they never touch a work
// recreated under the same name.
func (a *ManagedClusterAdapter) stampDeleteOption(ctx context.Context, w *metav1.ObjectMeta, want decision.DeleteOption) (result stampResult, why string, err error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(manifestWorkGVK)
	obj.SetNamespace(w.Namespace)
	obj.SetName(w.Name)
	// A work with the signal label is the operator's signal work or a copy
	// of one: its whole spec may be the operator's, so only deleteOption
	// is patched.
	if w.Labels[v1alpha1.SignalWorkLabel] == "true" {
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": w.UID},
			"spec":     map[string]any{"deleteOption": deleteOptionSpec(want)},
		})
		err = a.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	} else {
		obj.Object["metadata"] = map[string]any{"name": w.Name, "namespace": w.Namespace, "uid": string(w.UID),
			"annotations": map[string]any{v1alpha1.OrphaningAnnotation: want.PropagationPolicy}}
		obj.Object["spec"] = map[string]any{"deleteOption": deleteOptionSpec(want)}
		err = a.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(v1alpha1.FieldManager))
		if apierrors.IsConflict(err) && fieldManagerConflict(err) {
			st := stamp{gvk: manifestWorkGVK, spec: map[string]any{"deleteOption": deleteOptionSpec(want)}, defaulted: defaultedPropagationPolicy}
			took, why, terr := takeDefault(ctx, a.Client, a.apiReader, &metav1.PartialObjectMetadata{ObjectMeta: *w}, st, err)
			switch {
			case terr != nil:
				return stampStale, "", client.IgnoreNotFound(terr)
			case !took:
				return stampConflict, cmp.Or(why, "another manager owns it"), nil
			}
			err = a.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(v1alpha1.FieldManager))
		}
	}
	switch {
	case apierrors.IsConflict(err) && fieldManagerConflict(err):
		return stampConflict, "another manager owns it", nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return stampStale, "", nil // a UID precondition that failed: the watch brings the new work
	case err != nil:
		return stampStale, "", err
	}
	a.inflight.stamp(w.Namespace, w.UID, obj.GetGeneration())
	if want.PropagationPolicy == string(workv1.DeletePropagationPolicyTypeOrphan) {
		a.Metrics.OrphanedWorks.Inc()
	}
	return stampWritten, "", nil
}

// fieldManagerConflict says whether a server-side apply was refused
// because another manager owns a field it sets.
func fieldManagerConflict(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// orphanApplied says whether the work agent has applied the work's current
// generation, at least the one this process stamped: its Applied condition
// observed it. Deleting a work with an orphaning deleteOption is safe only
// then.
func (a *ManagedClusterAdapter) orphanApplied(w *workv1.ManifestWork) bool {
	if w.Generation < a.inflight.stamped(w.UID) {
		return false
	}
	// Applied=False means some manifest failed to apply: the agent still
	// owns it and would delete it with the work.
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return applied != nil && applied.Status == metav1.ConditionTrue && applied.ObservedGeneration >= w.Generation
}

// bounded keeps the first maxNamed entries of a list for a message.
func bounded(items []string) []string {
	if len(items) <= maxNamed {
		return items
	}
	return append(slices.Clone(items[:maxNamed]), fmt.Sprintf("and %d more", len(items)-maxNamed))
}
