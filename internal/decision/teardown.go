package decision

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
)

// unservedRetry is how soon a teardown held on an unserved resource looks
// again without a CRD event: the API server may serve a new CRD's resource
// shortly after the CRD's last event.
const unservedRetry = 30 * time.Second

// teardown is the state of one planning: the policy's decisions for the
// cluster, and the plan being built.
type teardown struct {
	g        *Governed
	s        *Snapshot
	p        *cel.Policy
	strategy v1alpha1.RemoveStrategyType
	deadline time.Time
	plan     *Plan
	built    []built
	// options are the deleteOptions the teardown requires, by work UID:
	// each work's orphaning rules are evaluated once per plan, so the
	// reconcile's CEL budget is spent once on them.
	options map[types.UID]requiredOption
	// reachableFor is how long a cluster taken as available by its lease
	// alone stays so: a wait looks again then, as no event says it.
	reachableFor time.Duration
}

// requiredOption is one work's required deleteOption, or why it cannot be
// decided.
type requiredOption struct {
	option DeleteOption
	err    error
}

// PlanTeardown decides the teardown of the snapshot's cluster under its
// governing policy: the only teardown decision. It makes no API call: the
// operator executes the next step's writes, the preview prints it. A
// cluster that is not being deleted is planned as if it were deleted now.
func PlanTeardown(g *Governed, s *Snapshot) *Plan {
	plan := &Plan{Cluster: s.Cluster.GetName(), Deleting: s.Cluster.GetDeletionTimestamp() != nil, Steps: []Step{}}
	plan.Available = s.Available()
	reachable, reachableFor := s.reachability()
	plan.Reachable = reachable
	plan.Suspended, plan.Hooks = g.Suspended, Hooks(s.Cluster)
	plan.Begun = Begun(s.Cluster) || s.Fleet.Recorded(s.Cluster.GetUID())
	switch {
	case g.Held != nil:
		plan.Held = g.Held.Error()
		return plan
	case g.Policy == nil:
		return planRelease(plan, s)
	}
	p := g.Policy
	plan.Policy, plan.PolicyGeneration, plan.PolicyUID = p.Name, p.Generation, p.UID
	switch {
	case g.Selection != nil:
		plan.Governs = g.Selection.Why()
	case Pinned(s.Cluster):
		plan.Governs = "the cluster is being deleted: its teardown stays with the policy that began it"
	}
	plan.DryRun, plan.Timeout = p.Spec.DryRun, Timeout(p).String()
	strategy, err := Strategy(p, g.Activation)
	if err != nil {
		plan.Held = err.Error()
		return plan
	}
	plan.Strategy = strategy
	t := &teardown{g: g, s: s, p: p, strategy: strategy, plan: plan, deadline: s.Now.Add(Timeout(p)), reachableFor: reachableFor,
		options: map[types.UID]requiredOption{}}
	if start, ok := CleanupStart(s); ok && !s.Memory.Resumed {
		t.deadline = start.Add(Timeout(p))
	}
	plan.Works = t.workPlans()
	if t.resumed() && t.hooks() && t.blastRadius() && t.add(t.orphaning()) && t.add(t.signal()) && t.add(t.gate()) && t.stages() && t.add(t.namespace()) {
		t.add(t.finish())
	}
	t.labelOnlyWhileNeeded()
	t.settle()
	t.outOfOrder()
	return plan
}

// built is a step planned, before it is given its state.
type built struct {
	step       Step
	done, stop bool
}

// signalLabels says whether the signal step, planned already, labels the
// namespace.
func (t *teardown) signalLabels() bool {
	for _, b := range t.built {
		if b.step.Kind == StepSignal {
			return slices.ContainsFunc(b.step.Actions, func(a Action) bool { return a.Verb == VerbLabel })
		}
	}
	return false
}

// add plans a step, done or not, and reports whether the steps after it
// can be planned (false after a decision that failed).
func (t *teardown) add(s Step, done, stop bool) bool {
	t.built = append(t.built, built{step: s, done: done, stop: stop})
	return !stop
}

// settle gives each step its state: the first step not done is the next
// one; the steps after it are later, and say what they would do.
func (t *teardown) settle() {
	blocked := false
	for _, b := range t.built {
		s := b.step
		switch {
		case blocked:
			s.State = StateLater
		case b.done:
			s.State, s.Report = StateDone, nil
		default:
			s.State, blocked = StateNext, true
		}
		t.plan.Steps = append(t.plan.Steps, s)
	}
}

// labelOnlyWhileNeeded drops the signal's namespace label when nothing is
// left to delete before a namespace that is kept: the label only refuses
// new work while the teardown runs, and the namespace step would take it
// off again at once.
func (t *teardown) labelOnlyWhileNeeded() {
	if ns := t.s.Namespace; ns != nil && HasMark(ns) {
		return // the namespace step takes the mark off
	}
	var signal *built
	for i := range t.built {
		b := &t.built[i]
		switch b.step.Kind {
		case StepOrphaning, StepFinish:
		case StepSignal:
			signal = b
			if len(b.step.Actions) != 1 || b.step.Actions[0].Verb != VerbLabel {
				return
			}
		case StepNamespace:
			if signal == nil || b.stop || len(b.step.Actions) != 1 || !slices.Contains([]Verb{VerbKeep, VerbUnlabel}, b.step.Actions[0].Verb) {
				return
			}
			// Neither labelled now nor by the signal step: kept as it is,
			// for the reason the namespace step kept it.
			signal.step.Actions, signal.done = nil, true
			a := &b.step.Actions[0]
			a.Verb, a.For, b.done = VerbKeep, strings.TrimSuffix(a.For, "; "+v1alpha1.ClusterDeletingLabel), true
			return
		default:
			if !b.done {
				return
			}
		}
	}
}

func (t *teardown) pastDeadline() bool { return !t.s.Now.Before(t.deadline) }

// mayForce says whether the work agent's finalizer may be removed now:
// BestEffort past the timeout or on an unavailable cluster, Needless past
// the timeout, Required never.
func (t *teardown) mayForce() bool {
	switch t.strategy {
	case v1alpha1.RemoveStrategyBestEffort:
		return t.pastDeadline() || !t.plan.Available
	case v1alpha1.RemoveStrategyNeedless:
		return t.pastDeadline()
	}
	return false
}

// waiting is the report of a step that waits for objects to go: until the
// deadline a requeue at it, after it CleanupFailed naming what remains
// (unless the strategy forces).
func (t *teardown) waiting(reason, message string, remaining []string) *Report {
	if t.pastDeadline() && !t.mayForce() {
		return &Report{Reason: v1alpha1.CleanupFailedReason, Event: v1alpha1.CleanupFailedReason, Message: fmt.Sprintf(
			"%s; the %s timeout passed and %d object(s) remain: %s", message, t.strategy, len(remaining), Bounded(remaining, ", "))}
	}
	r := &Report{Reason: reason, Message: message}
	if !t.pastDeadline() {
		r.Requeue.Duration = t.deadline.Sub(t.s.Now)
	}
	if t.strategy == v1alpha1.RemoveStrategyBestEffort && t.reachableFor > 0 {
		r.Requeue.Duration = earliest(r.Requeue.Duration, t.reachableFor)
	}
	return r
}

// held is the report of a step that cannot go on.
func held(message, action string, requeue time.Duration) *Report {
	return &Report{Reason: v1alpha1.CleanupFailedReason, Event: v1alpha1.CleanupFailedReason, Action: action, Message: message, Requeue: metav1.Duration{Duration: requeue}}
}

// HeldReport is the report of a plan that holds: nothing is deleted.
func (p *Plan) HeldReport() *Report {
	return held("held, nothing is deleted: "+p.Held, "", 0)
}

// HeldReport is the report of a teardown that cannot read what it needs.
func HeldReport(err error) *Report {
	return held("held, nothing is deleted: "+err.Error(), "", 0)
}

// holdStep is a step that holds on a decision that failed: nothing after it
// can be planned.
func holdStep(kind StepKind, name string, err error) (Step, bool, bool) {
	msg := "held, nothing more is deleted: " + err.Error()
	return Step{Kind: kind, Name: name, Undecided: true, Actions: []Action{{Verb: VerbHold, For: err.Error()}}, Report: held(msg, "", 0)}, false, true
}

// objectActions are the actions of a group of objects to delete: delete
// what is not being deleted, force what is (or, right after its delete,
// what will be) where the strategy allows it, and wait for the rest. An
// object this process deleted or forced already is waited for while the
// cache catches up.
func (t *teardown) objectActions(objs []Object, group int, priority string) []Action {
	out := make([]Action, 0, len(objs))
	for _, o := range objs {
		a := objectAction(o)
		a.Group, a.Priority = group, priority
		uid := o.Meta.UID
		forcible := t.mayForce() && slices.Contains(o.Meta.Finalizers, v1alpha1.WorkAgentFinalizer) && !t.s.Memory.Forced[uid]
		switch {
		case o.Meta.DeletionTimestamp == nil && !t.s.Memory.Deleted[uid]:
			a.Verb = VerbDelete
			if o.GVR == ManifestWorks || o.Outside {
				// Deleted as decided on, or checked again: outside the
				// cluster namespace, its when decided it is the cluster's.
				a.ResourceVersion = o.Meta.ResourceVersion
			}
			out = append(out, a)
			if forcible {
				// Forced only once its delete went through.
				out = append(out, t.force(a, "once deleted"))
			}
			continue
		case o.Meta.DeletionTimestamp != nil && forcible:
			a = t.force(a, "")
		default:
			a.Verb, a.For = VerbWait, "its finalizers to be removed"
		}
		if a.Agent = t.agentDeleting(o); a.Agent != "" {
			a.For += "; the work agent reports " + a.Agent
		}
		out = append(out, a)
	}
	return out
}

// force is the action removing the work agent's finalizer from an object,
// saying why the strategy allows it now.
func (t *teardown) force(a Action, when string) Action {
	a.Verb, a.Finalizer, a.ResourceVersion, a.For = VerbForce, v1alpha1.WorkAgentFinalizer, "", "the cluster is unavailable"
	if t.pastDeadline() {
		a.For = "the timeout passed"
	}
	if when != "" {
		a.For += "; " + when
	}
	return a
}

func objectAction(o Object) Action {
	return Action{Resource: ResourceName(o.GVR), Namespace: o.Meta.Namespace, Name: o.Meta.Name, UID: o.Meta.UID, Meta: o.Meta}
}

// count counts the actions of a verb in a group.
func count(actions []Action, verb Verb, group int) int {
	n := 0
	for _, a := range actions {
		if a.Verb == verb && a.Group == group {
			n++
		}
	}
	return n
}

// agentDeleting is what the work agent says of a work it is deleting, in
// the work's Deleting condition (OCM 1.1 and later), or "" when the object
// is no work or the condition is absent.
func (t *teardown) agentDeleting(o Object) string {
	if o.GVR != ManifestWorks || o.Meta.DeletionTimestamp == nil {
		return ""
	}
	w := t.s.Works[o.Meta.UID]
	if w == nil {
		return ""
	}
	return AgentDeleting(w)
}

// AgentDeleting describes a work's Deleting condition: its status, reason
// and message; "" without one.
func AgentDeleting(w *workv1.ManifestWork) string {
	c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkDeleting)
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%s=%s since %s (%s: %s)", c.Type, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, c.Message)
}

// Hooks are the pre-cleanup hook annotations of a cluster, by key: while
// any remains, its cleanup holds before its first write.
func Hooks(cluster interface{ GetAnnotations() map[string]string }) []string {
	var out []string
	for key := range cluster.GetAnnotations() {
		if strings.HasPrefix(key, v1alpha1.PreCleanupHookPrefix) {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// Paused says whether the cluster carries the paused annotation with a
// value other than a false one ("false", "0", ...): a value the operator
// cannot read ("yes", "") pauses too, as no write beats a guess.
func Paused(cluster interface{ GetAnnotations() map[string]string }) bool {
	if cluster == nil {
		return false
	}
	v, ok := Annotation(cluster, v1alpha1.PausedAnnotation)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// suspension says why the operator makes no write for a cluster and what
// it governs: the cluster's paused annotation, the suspend of the policy
// that governs it, or the suspend of the policy its governing-policy
// annotation names (a suspended policy keeps the clusters it had, even
// those another policy's selector would take, until it is resumed; even
// while it is being deleted or does not decode). suspended are the names
// of the suspended policies, read raw. Empty: writes may be made.
func suspension(cluster *unstructured.Unstructured, governor *cel.Policy, suspended map[string]bool) string {
	if cluster != nil && Paused(cluster) {
		return fmt.Sprintf("paused by the annotation %s: %q on the ManagedCluster", v1alpha1.PausedAnnotation, cluster.GetAnnotations()[v1alpha1.PausedAnnotation])
	}
	if governor != nil && governor.Spec.Suspend {
		return fmt.Sprintf("suspended by CleanupPolicy %s (spec.suspend)", governor.Name)
	}
	if pin := Pin(cluster); pin != "" && suspended[pin] {
		return fmt.Sprintf("suspended by CleanupPolicy %s (spec.suspend), which the cluster names as its governor", pin)
	}
	return ""
}

// hooks adds, while pre-cleanup hooks remain, the step that holds the
// teardown before its first step: it writes nothing but the condition
// (Unknown: the cleanup has not started), and no strategy or timeout ever
// forces past it. The steps after it are planned, to say what follows. A
// cluster without hooks has no such step.
func (t *teardown) hooks() bool {
	hooks := Hooks(t.s.Cluster)
	if len(hooks) == 0 {
		return true
	}
	st := Step{Kind: StepHooks}
	for _, h := range hooks {
		st.Actions = append(st.Actions, Action{Verb: VerbHold, Resource: ManagedClustersResource, Name: t.plan.Cluster,
			For: "the pre-cleanup hook " + h + " to be removed"})
	}
	st.Report = &Report{Pending: true, Reason: v1alpha1.WaitingForHooksReason, Event: v1alpha1.WaitingForHooksReason, Action: "Hooks",
		Message: fmt.Sprintf("waiting for %d pre-cleanup hook(s) to be removed from the ManagedCluster: %s; nothing is written or deleted until the last one goes",
			len(hooks), strings.Join(hooks, ", "))}
	return t.add(st, false, false)
}

// resumed is the only step of the first teardown reconcile after the
// operator saw the cluster paused or its policy suspended: it writes the
// condition alone (Unknown, Resumed), and the timeout counts from it, as
// after pre-cleanup hooks, so that the time spent paused or suspended
// never lets a timeout force anything. A dry run reports its plan instead.
func (t *teardown) resumed() bool {
	if !t.s.Memory.Resumed || !t.plan.Deleting || t.plan.DryRun {
		return true
	}
	st := Step{Kind: StepResumed}
	st.Report = &Report{Pending: true, Reason: v1alpha1.ResumedReason, Action: "Resume",
		Message: "the cleanup resumes after a pause or a suspended policy; its timeout counts from now"}
	return t.add(st, false, false)
}

// CleanupStart is when the cleanup of a deleted cluster started, the
// moment its timeout counts from: its deletion, or, when pre-cleanup hooks
// held it or the cleanup resumed after a pause (reason Resumed), the
// moment the first step after that was reported (ContentDeleteSuccess
// turned from Unknown to False then). While hooks
// hold it (the condition is Unknown) it has not started: the start is now.
// A time spent held by hooks never lets a timeout force anything. ok is
// false for a cluster that is not being deleted.
func CleanupStart(s *Snapshot) (time.Time, bool) {
	ts := s.Cluster.GetDeletionTimestamp()
	if ts == nil {
		return time.Time{}, false
	}
	start := ts.Time
	for _, c := range ClusterConditions(s.Cluster) {
		if c.Type != v1alpha1.ContentDeleteSuccessCondition {
			continue
		}
		switch {
		case c.Status == metav1.ConditionUnknown && slices.Contains(notStarted, c.Reason):
			start = s.Now
		case c.Status == metav1.ConditionFalse && c.LastTransitionTime.After(start):
			start = c.LastTransitionTime.Time
		}
	}
	return start, true
}

// outOfOrder finds the add-ons and works of the cluster namespace being
// deleted before the step of the teardown that deletes them, and makes the
// next step report them (DeletedOutOfOrder); the record notes them as a
// hold (OutOfOrderHold).
// The operator deletes a stage's objects only once the stage is the next
// step, and the signal work in the signal step: any other deletion is
// someone else's, such as OCM's own cleanup when admission does not hold
// it. The teardown goes on as planned. A dry run holds nothing of OCM's
// and expects its deletions.
func (t *teardown) outOfOrder() {
	next := t.plan.Next()
	if t.plan.DryRun || next == nil || next.Report == nil {
		return
	}
	before := !slices.Contains([]StepKind{StepStage, StepNamespace, StepFinish}, next.Kind)
	later := map[types.UID]bool{}
	for _, st := range t.plan.Steps {
		if st.State == StateLater && st.Kind == StepStage {
			for _, a := range st.Actions {
				later[a.UID] = true
			}
		}
	}
	for _, gvr := range []schema.GroupVersionResource{ManagedClusterAddOns, ManifestWorks} {
		for _, o := range t.s.Objects[gvr] {
			m := o.Meta
			if m.DeletionTimestamp == nil || t.s.Memory.Deleted[m.UID] || IsSignalWork(m) ||
				m.Namespace != t.plan.Cluster || !before && !later[m.UID] || ofAddOn(m) {
				continue
			}
			t.plan.OutOfOrder = append(t.plan.OutOfOrder, ResourceName(gvr)+"/"+m.Name)
		}
	}
	if len(t.plan.OutOfOrder) == 0 {
		return
	}
	slices.Sort(t.plan.OutOfOrder)
	msg := fmt.Sprintf("%d add-on(s) and work(s) of the cluster are being deleted by someone other than the operator, "+
		"before the step of the teardown that deletes them: %s; %s", len(t.plan.OutOfOrder), Bounded(t.plan.OutOfOrder, ", "), t.deleter())
	r := *next.Report
	r.Reason, r.Event, r.Message = v1alpha1.DeletedOutOfOrderReason, v1alpha1.DeletedOutOfOrderReason, msg+"; meanwhile: "+r.Message
	next.Report = &r
}

// OutOfOrderHold is why the record notes a hold while add-ons or works are
// deleted out of order; "" when none is.
func (p *Plan) OutOfOrderHold() string {
	if len(p.OutOfOrder) == 0 {
		return ""
	}
	return "deleted by someone other than the operator before their step: " + Bounded(p.OutOfOrder, ", ")
}

// deleter says who deletes out of order, as far as the API shows it: it
// records no deleter, but OCM's own cleanup runs on a cluster that carries
// its finalizer, and deletes there unless admission holds it.
func (t *teardown) deleter() string {
	if slices.Contains(t.s.Cluster.GetFinalizers(), v1alpha1.OCMResourceCleanupFinalizer) {
		return "the API does not record who deleted them; OCM's resource cleanup runs on this cluster (finalizer " +
			v1alpha1.OCMResourceCleanupFinalizer + "): if it deleted them, the admission policy cleanup-operator-ocm-cleanup-hold " +
			"did not hold it: check that it exists and that the operator's --ocm-cleanup-users names the user " +
			"OCM's registration controller runs as"
	}
	return "the API does not record who deleted them"
}

// ofAddOn says whether a work belongs to an add-on (an owner reference to
// its ManagedClusterAddOn): the add-on's manager, or the garbage collector
// once the add-on is gone, deletes it with its add-on.
func ofAddOn(m *metav1.PartialObjectMetadata) bool {
	return slices.ContainsFunc(m.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.Kind == "ManagedClusterAddOn" && strings.HasPrefix(o.APIVersion, ManagedClusterAddOns.Group+"/")
	})
}
