package decision

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// ResourceOf names the resource of a manifest's kind: from the work agent's
// status when it reported it, else from the API server's REST mapping.
type ResourceOf func(index int, gvk schema.GroupVersionKind) (resource string, err error)

// Orphaning decides a work's deleteOption: each manifest is orphaned when any
// rule is true for it; all orphaned gives Orphan, some SelectivelyOrphan,
// none nothing. A rule that fails, or a kind whose resource is unknown, fails
// the whole decision: the work is not stamped on a guess.
func Orphaning(p *cel.Policy, a *cel.Activation, work map[string]any, manifests []map[string]any, resourceOf ResourceOf) (DeleteOption, error) {
	var d DeleteOption
	if len(p.Orphaning) == 0 || len(manifests) == 0 {
		return d, nil
	}
	wa := a.With(cel.VarWork, work)
	for i, m := range manifests {
		rule := ""
		for j, expr := range p.Orphaning {
			ok, err := expr.Bool(wa.With(cel.VarManifest, m))
			if err != nil {
				return DeleteOption{}, fmt.Errorf("manifest %d: %w", i, err)
			}
			if ok {
				rule = p.Spec.Orphaning[j].Name
				break
			}
		}
		if rule == "" {
			continue
		}
		gvk, name, namespace := manifestIdentity(m)
		resource, err := resourceOf(i, gvk)
		if err != nil {
			return DeleteOption{}, fmt.Errorf("manifest %d (%s %s), orphaned by rule %s: %w", i, gvk.Kind, name, rule, err)
		}
		d.Orphans = append(d.Orphans, Orphan{Group: gvk.Group, Resource: resource, Namespace: namespace, Name: name})
		d.Rules = append(d.Rules, rule)
	}
	switch len(d.Orphans) {
	case 0:
	case len(manifests):
		d.PropagationPolicy = "Orphan"
		d.Orphans = nil
	default:
		d.PropagationPolicy = "SelectivelyOrphan"
	}
	return d, nil
}

func manifestIdentity(m map[string]any) (gvk schema.GroupVersionKind, name, namespace string) {
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	gv, _ := schema.ParseGroupVersion(apiVersion)
	md, _ := m["metadata"].(map[string]any)
	name, _ = md["name"].(string)
	namespace, _ = md["namespace"].(string)
	return gv.WithKind(kind), name, namespace
}

// SignalRole is what a ManifestWork is to the deletion signal.
type SignalRole int

const (
	// NotSignal is any work but the operator's signal works.
	NotSignal SignalRole = iota
	// CurrentSignal is the operator's signal work the policy keeps: its
	// deletion is the signal.
	CurrentSignal
	// RetiredSignal is an operator's signal work the policy no longer keeps:
	// its deletion must not signal.
	RetiredSignal
)

// TeardownOrphaning is the deleteOption a teardown requires of a work, and
// the work agent must have applied, before the work is deleted: Orphan for
// every work under Needless, whatever the orphaning rules say (rules is not
// called); nothing for the current signal work and Orphan for a retired
// one; otherwise what the rules decide. The operator and the preview both
// decide through it.
func TeardownOrphaning(strategy v1alpha1.RemoveStrategyType, role SignalRole, rules func() (DeleteOption, error)) (DeleteOption, error) {
	switch {
	case strategy == v1alpha1.RemoveStrategyNeedless, role == RetiredSignal:
		return DeleteOption{PropagationPolicy: "Orphan"}, nil
	case role == CurrentSignal:
		return DeleteOption{}, nil
	}
	return rules()
}

// AddonOf names the add-on whose manager made a ManifestWork (the label
// OCM's add-on framework puts on the works it makes), or "".
func AddonOf(w metav1.Object) string {
	return w.GetLabels()[addonv1alpha1.AddonLabelKey]
}

// AddonUnreachable says why a teardown cannot give an add-on's work the
// deleteOption its policy requires: the add-on manager re-applies its
// works, so the operator does not write their deleteOption (a write war
// it would lose), and says how to keep the manifests instead.
func AddonUnreachable(key, addon string, have, want DeleteOption) string {
	return fmt.Sprintf("%s belongs to add-on %s, whose manager re-applies it, so the operator does not write its spec.deleteOption: "+
		"the policy requires %s, the work has %s; to keep those manifests on the managed cluster, annotate each %s in the add-on's manifests "+
		"(its AddOnTemplate or agent add-on), which the add-on framework honours when it builds the work, or delete the cluster with a policy whose rules do not orphan them",
		key, addon, want.Describe(), have.Describe(), addonv1alpha1.DeletionOrphanAnnotationKey)
}

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
