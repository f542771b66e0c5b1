package decision

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// signal labels the cluster namespace and deletes the deletion-signal work,
// then waits until the work agent has removed it. A work of that name the
// operator did not create holds the step: it is neither changed nor deleted.
func (t *teardown) signal() (Step, bool, bool) {
	st := Step{Kind: StepSignal, Name: SignalWorkName(t.p)}
	if ns := t.s.Namespace; ns != nil && ns.Name == t.plan.Cluster && ns.DeletionTimestamp == nil && ns.Labels[v1alpha1.ClusterDeletingLabel] != "true" {
		st.Actions = append(st.Actions, Action{Verb: VerbLabel, Resource: NamespacesResource, Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion,
			For: v1alpha1.ClusterDeletingLabel + "=true"})
	}
	work := t.signalWork()
	if work == nil {
		return st, len(st.Actions) == 0, false
	}
	name := work.Meta.Name
	if !t.s.SignalOwned {
		msg := "held at the signal: " + NotOwnedMessage("ManifestWork", work.Meta.Namespace, name, work.Meta) +
			"; rename it, or change spec.deletionSignal.workName of CleanupPolicy " + t.p.Name
		a := objectAction(*work)
		a.Verb, a.For = VerbHold, msg
		st.Actions = append(st.Actions, a)
		st.Report = held(msg, "Signal", 0)
		return st, false, false
	}
	actions := t.objectActions([]Object{*work}, 0, "")
	st.Actions = append(st.Actions, actions...)
	msg := fmt.Sprintf("waiting for the deletion-signal work %s to be removed from the managed cluster", name)
	if count(actions, VerbForce, 0) > 0 {
		msg = fmt.Sprintf("removed the work agent's finalizer from the deletion-signal work %s", name)
	}
	st.Report = t.waiting(v1alpha1.SignallingReason, msg, []string{work.Key()})
	if count(actions, VerbDelete, 0) > 0 {
		st.Report.Event = v1alpha1.SignallingReason
	}
	return st, false, false
}

// signalWork is the work named like the policy's deletion-signal work.
func (t *teardown) signalWork() *Object {
	name := SignalWorkName(t.p)
	var work *Object
	for i, w := range t.s.Objects[ManifestWorks] {
		if name != "" && w.Meta.Name == name {
			work = &t.s.Objects[ManifestWorks][i]
		}
	}
	return work
}

// gate waits until no monitored object remains. It deletes none.
func (t *teardown) gate() (Step, bool, bool) {
	st := Step{Kind: StepGate}
	var resources []string
	for _, m := range MonitoredResources(t.p) {
		resources = append(resources, ResourceName(m.GVR))
	}
	st.Resource = strings.Join(resources, ", ")
	if msg, ok := t.heldOnUnserved("the gate", MonitoredFields(t.p.Spec)); ok {
		st.Actions = []Action{{Verb: VerbHold, For: msg}}
		st.Report = held(msg, "Hold/the gate", unservedRetry)
		return st, false, false
	}
	holding, err := Gate(t.p, t.g.Activation, t.s.Objects)
	if err != nil {
		st, done, stop := holdStep(StepGate, "", err)
		st.Resource = strings.Join(resources, ", ")
		return st, done, stop
	}
	if len(holding) == 0 {
		return st, true, false
	}
	for _, o := range holding {
		a := objectAction(o)
		a.Verb, a.For = VerbWait, "its controller to remove it"
		st.Actions = append(st.Actions, a)
	}
	msg := fmt.Sprintf("waiting for %d monitored object(s) to be removed by their controllers: %s", len(holding), Bounded(Keys(holding), ", "))
	st.Report = t.waiting(v1alpha1.WaitingForMonitoredResourcesReason, msg, Keys(holding))
	if st.Report.Reason == v1alpha1.WaitingForMonitoredResourcesReason {
		st.Report.Event = st.Report.Reason
	}
	return st, false, false
}

// heldOnUnserved says why a step holds when one of its fields names a
// resource the API server does not serve, or serves cluster-scoped.
func (t *teardown) heldOnUnserved(where string, fields []UnservedField) (string, bool) {
	var parts []string
	for _, f := range fields {
		f.ClusterScoped, f.Namespaced = t.s.ClusterScoped[f.GVR], t.s.Namespaced[f.GVR]
		if t.s.Unserved[f.GVR] || (f.WantClusterScoped && f.Namespaced) || (!f.WantClusterScoped && f.ClusterScoped) {
			parts = append(parts, f.String())
		}
	}
	if len(parts) == 0 {
		return "", false
	}
	return fmt.Sprintf("held at %s, nothing more is deleted: %s; the hold ends when the resource is served, namespaced, or removed from CleanupPolicy %s",
		where, strings.Join(parts, "; "), t.p.Name), true
}

// stages adds one step per stage: the first stage that holds objects
// deletes them, lowest cleanup-priority group first, and waits until they
// are gone. It reports whether the steps after them can be planned.
func (t *teardown) stages() bool {
	stages := Stages(t.p)
	signal := SignalWorkName(t.p)
	assigned, err := AssignStages(t.p, t.g.Activation, stages, t.s.Objects, t.s.Outside, func(o Object) bool {
		return o.GVR == ManifestWorks && signal != "" && o.Meta.Name == signal
	})
	if err != nil {
		return t.add(holdStep(StepStage, "", err))
	}
	for i, objs := range assigned {
		if !t.add(t.stage(i, len(stages), stages[i], objs)) {
			return false
		}
	}
	return true
}

// stage is the step of stage i of n. Only a stage the policy declares holds
// on a resource not served: the default stages' kinds may be absent from a
// hub, and then nothing of them can exist.
func (t *teardown) stage(i, n int, s Stage, objs []Object) (Step, bool, bool) {
	st := Step{Kind: StepStage, Name: s.Name, Resource: ResourceName(s.GVR)}
	where := fmt.Sprintf("stage %s (%d of %d)%s", s.Name, i+1, n, s.where())
	if len(t.p.Spec.DeletionStages) > 0 {
		if msg, ok := t.heldOnUnserved(where, StageFields(t.p.Spec)[i:i+1]); ok {
			st.Actions = []Action{{Verb: VerbHold, For: msg}}
			st.Report = held(msg, "Hold/"+where, unservedRetry)
			return st, false, false
		}
	}
	if len(objs) == 0 {
		return st, true, false
	}
	groups := Groups(objs)
	st.Actions = t.groupActions(i, s, groups, len(t.s.Objects[s.GVR])-len(objs))
	first, priority := groups[0], PriorityName(groups[0][0].Meta)
	if deleted := count(st.Actions, VerbDelete, 0); deleted > 0 {
		// No Event: a group's deletes are in the teardown record, each
		// object with its group, and in the log; the condition shows the
		// step.
		st.Report = &Report{Reason: v1alpha1.DeletingStageReason, Message: fmt.Sprintf(
			"%s: deleting %d %s with cleanup-priority %s: %s; %d remain in the stage",
			where, deleted, s.GVR.Resource, priority, Bounded(Keys(first), ", "), len(objs)),
			Requeue: metav1.Duration{Duration: max(t.deadline.Sub(t.s.Now), 0)}}
		waitOutside(s, st.Report)
		return st, false, false
	}
	// The group deleted first is what the stage waits for; the rest of the
	// stage is not deleted before it is gone.
	msg := fmt.Sprintf("%s: %d %s remain; waiting for the finalizers of those being deleted: %s",
		where, len(objs), s.GVR.Resource, Bounded(Keys(first), ", "))
	if agent := agentSays(st.Actions); len(agent) > 0 {
		msg += "; the work agent reports " + Bounded(agent, "; ")
	}
	if forced := count(st.Actions, VerbForce, 0); forced > 0 {
		msg = fmt.Sprintf("%s: removed the work agent's finalizer from %d of the %d object(s) in the stage", where, forced, len(objs))
	}
	st.Report = t.waiting(v1alpha1.ResourcesRemainingReason, msg, Keys(objs))
	waitOutside(s, st.Report)
	return st, false, false
}

// groupActions are the actions of stage i's groups, in order. Each group
// may go in one deletecollection that leaves out, by name, what remains of
// its resource in the namespace once the groups before it are gone (the
// later groups, and others of the resource, of other stages or of none);
// the plan says so from the start.
func (t *teardown) groupActions(i int, s Stage, groups [][]Object, others int) []Action {
	var actions []Action
	leftOut := others
	for _, g := range groups {
		leftOut += len(g)
	}
	for gi, g := range groups {
		from := len(actions)
		actions = append(actions, t.objectActions(g, gi, PriorityName(g[0].Meta))...)
		leftOut -= len(g)
		if t.collectable(i, s, actions[from:], leftOut) {
			for j := from; j < len(actions); j++ {
				actions[j].Collection = true
			}
		}
	}
	return actions
}

// waitOutside says where a stage outside the cluster namespace waits: the
// events of its objects name no cluster, so the executor maps the events
// of those namespaces ("" for cluster-scoped objects) back to the
// teardowns that wait there.
func waitOutside(s Stage, r *Report) {
	if !s.Outside() || r.Reason == v1alpha1.CleanupFailedReason {
		return
	}
	if s.ClusterScoped {
		r.WaitsOutside = []string{""}
		return
	}
	r.WaitsOutside = slices.Clone(s.Namespaces)
}

// namespace deletes the cluster namespace unless the policy keeps it (then
// it takes the deleting label off), and moves on: its termination is the
// namespace controller's. A namespace not named after the cluster is never
// deleted.
func (t *teardown) namespace() (Step, bool, bool) {
	st := Step{Kind: StepNamespace}
	ns := t.s.Namespace
	if ns == nil {
		return st, true, false
	}
	st.Name = ns.Name
	if ns.Name != t.plan.Cluster {
		return holdStep(StepNamespace, "", fmt.Errorf("namespace %q is not the namespace of cluster %q", ns.Name, t.plan.Cluster))
	}
	if why := NamespaceKept(ns, t.s.Cluster, namespaceDeny(t.s)); why != "" {
		return t.keepNamespace(st, why)
	}
	value, err := NamespaceValue(ns)
	if err == nil {
		var keep bool
		if keep, err = KeepNamespace(t.p, t.g.Activation, value); err == nil && keep {
			return t.keepNamespace(st, "keepNamespace is true")
		}
	}
	if err != nil {
		return holdStep(StepNamespace, "", err)
	}
	if ns.DeletionTimestamp != nil || t.s.Memory.Deleted[ns.UID] {
		return st, true, false
	}
	st.Actions = []Action{{Verb: VerbDelete, Resource: NamespacesResource, Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion}}
	return st, false, false
}

// keepNamespace keeps the cluster namespace, for the reason why: it takes
// the deleting label and the mark of governance off first when the
// namespace carries them (an unlabel takes off both).
func (t *teardown) keepNamespace(st Step, why string) (Step, bool, bool) {
	ns := t.s.Namespace
	a := Action{Verb: VerbKeep, Resource: NamespacesResource, Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, For: why}
	// Labelled now, or by the signal step before.
	if _, labelled := ns.Labels[v1alpha1.ClusterDeletingLabel]; (labelled || HasMark(ns) || t.signalLabels()) && ns.DeletionTimestamp == nil {
		a.Verb, a.For = VerbUnlabel, why+"; "+v1alpha1.ClusterDeletingLabel
	}
	st.Actions = []Action{a}
	return st, a.Verb == VerbKeep, false
}

// finish reports the outcome and removes the finalizer.
func (t *teardown) finish() (Step, bool, bool) {
	reason, msg := v1alpha1.CompletedReason, "the cluster's content was removed as declared"
	if n := t.s.Cluster.GetAnnotations()[v1alpha1.ForcedObjectsAnnotation]; n != "" {
		reason, msg = v1alpha1.ForcedReason, fmt.Sprintf("the hub side was cleaned; the work agent's finalizer was removed from %s object(s)", n)
	} else if t.strategy == v1alpha1.RemoveStrategyNeedless {
		reason, msg = v1alpha1.OrphanedReason, "the hub side was removed; everything on the managed cluster was left in place"
	}
	if u := UnconfirmedOrphans(t.s.Cluster); len(u) > 0 {
		msg += fmt.Sprintf("; %d ManifestWork(s) were deleted with an orphan not confirmed by the agent: %s", len(u), Bounded(u, ", "))
	}
	if ns := t.s.Namespace; ns != nil && ns.Name == t.plan.Cluster {
		if why := NamespaceKept(ns, t.s.Cluster, namespaceDeny(t.s)); why != "" {
			msg += "; the namespace was kept: " + why
		}
	}
	return Step{Kind: StepFinish, Actions: []Action{t.removeFinalizer(nil)},
		Report: &Report{Done: true, Reason: reason, Event: reason, Message: msg}}, false, false
}

func (t *teardown) removeFinalizer(annotations []string) Action {
	return removeFinalizerAction(t.s, annotations)
}

func removeFinalizerAction(s *Snapshot, annotations []string) Action {
	return Action{Verb: VerbRemoveFinalizer, Resource: ManagedClustersResource, Name: s.Cluster.GetName(), UID: s.Cluster.GetUID(),
		Finalizer: v1alpha1.ClusterCleanupFinalizer, Annotations: annotations}
}

// ClusterAnnotations are the annotations the operator puts on a
// ManagedCluster; a released cluster keeps none of them.
var ClusterAnnotations = []string{v1alpha1.GoverningPolicyAnnotation, v1alpha1.ForcedObjectsAnnotation,
	v1alpha1.ForcingAnnotation, v1alpha1.UnconfirmedOrphansAnnotation}

// planRelease lets a cluster being deleted go without a cleanup when no
// policy governs it: the operator has no mandate. It takes back the
// namespace label and, with its finalizer, its annotations; the cluster's
// content is left as it is. A cluster without the finalizer has nothing of
// the operator's to take back.
func planRelease(plan *Plan, s *Snapshot) *Plan {
	st := Step{Kind: StepFinish, Name: "release", State: StateNext,
		Report: &Report{Done: true, Event: v1alpha1.ReleasedReason, Message: "no CleanupPolicy governs the cluster; its content is left as it is"}}
	if ns := s.Namespace; ns != nil && ns.Name == plan.Cluster && ns.DeletionTimestamp == nil {
		if _, labelled := ns.Labels[v1alpha1.ClusterDeletingLabel]; labelled || HasMark(ns) {
			st.Actions = append(st.Actions, Action{Verb: VerbUnlabel, Resource: NamespacesResource, Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion,
				For: v1alpha1.ClusterDeletingLabel})
		}
	}
	if slices.Contains(s.Cluster.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
		var present []string
		for _, key := range ClusterAnnotations {
			if _, ok := s.Cluster.GetAnnotations()[key]; ok {
				present = append(present, key)
			}
		}
		st.Actions = append(st.Actions, removeFinalizerAction(s, present))
	}
	if len(st.Actions) == 0 {
		st.State, st.Report = StateDone, nil // nothing of the operator's to take back
	}
	plan.Steps = append(plan.Steps, st)
	return plan
}

// ForcedCount is the count of forced objects recorded on the cluster.
func ForcedCount(mc interface{ GetAnnotations() map[string]string }) int {
	n, _ := strconv.Atoi(mc.GetAnnotations()[v1alpha1.ForcedObjectsAnnotation])
	return n
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// agentSays lists what the work agent says of the works it is deleting,
// one "ManifestWork name: condition" each.
func agentSays(actions []Action) []string {
	var out []string
	for _, a := range actions {
		if a.Agent != "" {
			out = append(out, "ManifestWork "+a.Name+": "+a.Agent)
		}
	}
	return out
}
