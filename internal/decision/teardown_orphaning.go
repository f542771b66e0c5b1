package decision

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// orphaning is the first step: every work carries the deleteOption the
// teardown requires (TeardownOrphaning), and the work agent has applied
// it, before anything is deleted: the agent orphans a work's resources when
// it applies the deleteOption, and deletes what it still owns when the work
// goes first. A work whose decision cannot be made, or that another manager
// keeps reverting, holds the teardown.
func (t *teardown) orphaning() (Step, bool, bool) {
	st := Step{Kind: StepOrphaning}
	var stamps, pending, holds []string
	for _, o := range t.s.Objects[ManifestWorks] {
		w := t.s.Works[o.Meta.UID]
		if w == nil || w.DeletionTimestamp != nil {
			continue
		}
		a := objectAction(o)
		stamped := t.s.Memory.Stamped[w.UID]
		if w.Generation < stamped {
			a.Verb, a.For = VerbWait, "the cache to show the deleteOption just written"
			st.Actions, pending = append(st.Actions, a), append(pending, o.Key())
			continue
		}
		want, err := t.requiredOption(w)
		have := CurrentDeleteOption(w)
		switch {
		case err != nil:
			a.Verb, a.For = VerbHold, fmt.Sprintf("%s: %v", o.Key(), err)
		case !KeepsAtLeast(have, want) && AddonOf(w) != "":
			a.Verb, a.For = VerbHold, AddonUnreachable(o.Key(), AddonOf(w), have, want)
		case !KeepsAtLeast(have, want) && t.s.Memory.Restamps[w.UID] > MaxReapplies:
			a.Verb, a.For = VerbHold, fmt.Sprintf("%s: another manager keeps reverting spec.deleteOption (now %s); the policy requires %s",
				o.Key(), have.Describe(), want.Describe())
		case !KeepsAtLeast(have, want):
			a.Verb, a.DeleteOption, a.Option = VerbStamp, want.PropagationPolicy, &want
			a.Orphaned = WorkPlanOf(w.Name, want).Orphaned
			stamps = append(stamps, o.Key())
		case have.PropagationPolicy != "" && !OrphanApplied(w, stamped):
			a.Verb, a.For = VerbWait, "the work agent to apply its deleteOption "+have.PropagationPolicy
			pending = append(pending, o.Key())
		default:
			continue
		}
		if a.Verb == VerbHold {
			holds = append(holds, a.For)
		}
		st.Actions = append(st.Actions, a)
	}
	if len(holds) > 0 {
		st.Report = OrphaningHeld(holds)
		return st, false, false
	}
	if len(stamps)+len(pending) == 0 {
		return st, true, false
	}
	return t.awaitOrphans(st, stamps, pending)
}

// requiredOption is the deleteOption the teardown requires of a work,
// decided once per plan (workPlans and the orphaning step share it).
func (t *teardown) requiredOption(w *workv1.ManifestWork) (DeleteOption, error) {
	if r, ok := t.options[w.UID]; ok {
		return r.option, r.err
	}
	d, err := TeardownOrphaning(t.strategy, SignalRoleOf(t.p, w), func() (DeleteOption, error) {
		if err := t.s.ManifestsUnread[w.UID]; err != nil {
			return DeleteOption{}, err
		}
		return WorkOrphaning(t.p, t.g.Activation, w, t.s.ResourceOf)
	})
	t.options[w.UID] = requiredOption{option: d, err: err}
	return d, err
}

// OrphaningHeld is the report of works whose deleteOption cannot be
// decided or written.
func OrphaningHeld(holds []string) *Report {
	return held(fmt.Sprintf("held, nothing more is deleted: the deleteOption of %d ManifestWork(s) cannot be decided or written: %s",
		len(holds), Bounded(holds, "; ")), "", 0)
}

// awaitOrphans waits for the work agent to apply the deleteOptions. While
// the cluster is Available the agent is there to confirm them, and nothing
// is deleted unconfirmed, however long it takes; past the timeout that is
// reported as CleanupFailed. An unavailable cluster's works wait until the
// timeout; then Required keeps waiting, and BestEffort and Needless go on,
// once each work whose orphan the agent never confirmed is recorded.
func (t *teardown) awaitOrphans(st Step, stamps, pending []string) (Step, bool, bool) {
	waiting := append(slices.Clone(stamps), pending...)
	msg := fmt.Sprintf("%s: waiting for the work agent to apply the orphaning deleteOption of %d ManifestWork(s) before they are deleted: %s",
		t.strategy, len(waiting), Bounded(waiting, ", "))
	switch {
	case !t.pastDeadline():
		st.Report = &Report{Reason: v1alpha1.OrphaningReason, Message: msg, Requeue: metav1.Duration{Duration: t.deadline.Sub(t.s.Now)}}
		if len(stamps) > 0 {
			st.Report.Event = v1alpha1.OrphaningReason
		}
		return st, false, false
	case len(stamps) > 0:
		// Stamped now: the stamp's event brings the cluster back.
		st.Report = &Report{Reason: v1alpha1.OrphaningReason, Message: msg}
		return st, false, false
	case t.plan.Available || t.strategy == v1alpha1.RemoveStrategyRequired:
		why, requeue := "the cluster is Available, so nothing is deleted before its agent confirms", time.Duration(0)
		switch {
		case !t.plan.Available:
			why = "Required never deletes a work whose orphan the agent has not confirmed"
		case t.plan.Reachable != "":
			// Taken as available by its lease alone: no event says when
			// the lease goes stale.
			why, requeue = "the cluster is taken as available: "+t.plan.Reachable+"; nothing is deleted before its agent confirms", t.reachableFor
		}
		st.Report = held(fmt.Sprintf("%s; the %s timeout passed and %s", msg, t.strategy, why), "", requeue)
		return st, false, false
	}
	recorded := UnconfirmedOrphans(t.s.Cluster)
	var added []string
	for _, key := range pending {
		if !slices.Contains(recorded, key) {
			added = append(added, key)
		}
	}
	if len(added) == 0 {
		return st, true, false
	}
	st.Actions = append(st.Actions, Action{Verb: VerbRecordUnconfirmed, Resource: ManagedClustersResource, Name: t.s.Cluster.GetName(),
		UID: t.s.Cluster.GetUID(), Objects: added,
		For: "the timeout passed and the cluster is unavailable; an agent that returns may delete their resources"})
	return st, false, false
}

// UnconfirmedOrphans are the works recorded on the cluster as deleted with
// an orphan the agent never confirmed.
func UnconfirmedOrphans(mc interface{ GetAnnotations() map[string]string }) []string {
	return splitList(mc.GetAnnotations()[v1alpha1.UnconfirmedOrphansAnnotation])
}

// workPlans are the orphaning decisions of the cluster's works, for people:
// what stays on the managed cluster when each is deleted. The operator's
// signal works (the current one, whose deletion is the signal, and retired
// ones, always orphaned) are not among them; a look-alike follows the rules.
func (t *teardown) workPlans() []WorkPlan {
	var out []WorkPlan
	for _, o := range t.s.Objects[ManifestWorks] {
		w := t.s.Works[o.Meta.UID]
		if w == nil || SignalRoleOf(t.p, w) != NotSignal {
			continue
		}
		d, err := t.requiredOption(w)
		wp := WorkPlanOf(w.Name, d)
		if have := CurrentDeleteOption(w); err == nil && AddonOf(w) != "" && !KeepsAtLeast(have, d) {
			wp.Unreachable = AddonUnreachable(o.Key(), AddonOf(w), have, d)
		}
		if err != nil {
			wp = WorkPlan{Name: w.Name, Error: err.Error()}
		}
		out = append(out, wp)
	}
	SortWorks(out)
	return out
}
