package decision

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Plan is the teardown of one cluster, decided once from a snapshot: the
// steps in the order they are taken, each with its objects and what
// happens to each. The operator executes the next step's writes (Now);
// the preview prints the plan; a dry run reports it.
type Plan struct {
	Cluster string `json:"cluster"`
	// Policy governs the cluster; empty when none does.
	Policy string `json:"policy,omitempty"`
	// Governs says why Policy governs: the policies that matched and what
	// ranks it first; for a deleting cluster, that its teardown stays with
	// the policy that began it.
	Governs          string    `json:"governs,omitempty"`
	PolicyGeneration int64     `json:"policyGeneration,omitempty"`
	PolicyUID        types.UID `json:"-"`
	// Held, when set, says why nothing would be done.
	Held string `json:"held,omitempty"`
	// Suspended, when set, says why the operator makes no write at all for
	// the cluster (a suspended policy, or the cluster's paused annotation):
	// the steps say what it would do once resumed.
	Suspended string `json:"suspended,omitempty"`
	// Hooks are the pre-cleanup hook annotations that hold the teardown.
	Hooks []string `json:"hooks,omitempty"`
	// BlastRadius, when set, says why the policy's blast radius holds the
	// teardown before its first write.
	BlastRadius string `json:"blastRadius,omitempty"`
	DryRun      bool   `json:"dryRun,omitempty"`
	// OutOfOrder are the add-ons and works of the cluster namespace that
	// someone other than the operator is deleting before the step of the
	// teardown that deletes them (resource/name).
	OutOfOrder []string `json:"outOfOrder,omitempty"`
	// Begun says the teardown has begun, by its cluster's condition or its
	// record: the blast radius never holds it.
	Begun bool `json:"-"`
	// Deleting is true when the cluster is already being deleted.
	Deleting  bool                        `json:"deleting,omitempty"`
	Strategy  v1alpha1.RemoveStrategyType `json:"strategy,omitempty"`
	Timeout   string                      `json:"timeout,omitempty"`
	Available bool                        `json:"available"`
	// Reachable says why a cluster whose Available condition is not True
	// is taken as available (its agent renews its lease).
	Reachable string `json:"reachable,omitempty"`
	Steps     []Step `json:"steps"`
	// Works are the orphaning decisions of the cluster's works, by name.
	Works []WorkPlan `json:"works,omitempty"`
	// Prune are the prune decisions of the cluster's ConfigurationPolicies
	// (the preview fills them; the teardown does not read them).
	Prune []PrunePlan `json:"prune,omitempty"`
	// Protection is the deletion protection of a cluster not being deleted
	// (the preview fills it; the teardown does not read it).
	Protection *Protection `json:"protection,omitempty"`
}

// StepKind names a step of a teardown.
type StepKind string

// The steps of a teardown, in their order; stages repeat.
const (
	StepResumed StepKind = "resumed"
	StepHooks   StepKind = "hooks"
	// StepBlastRadius holds a teardown the policy's blast radius does not
	// let begin yet (BlastRadiusExceeded, WaitingForTurn).
	StepBlastRadius StepKind = "blastRadius"
	StepOrphaning   StepKind = "orphaning"
	StepSignal      StepKind = "signal"
	StepGate        StepKind = "gate"
	StepStage       StepKind = "stage"
	StepNamespace   StepKind = "namespace"
	StepFinish      StepKind = "finish"
)

// StepState says where a step stands.
type StepState string

// States of a step: done, the next one to take, or one after it.
const (
	StateDone  StepState = "done"
	StateNext  StepState = "next"
	StateLater StepState = "later"
)

// Step is one step of a teardown.
type Step struct {
	Kind StepKind `json:"kind"`
	// Name names a stage.
	Name string `json:"name,omitempty"`
	// Resource is a stage's resource (resource.group).
	Resource string    `json:"resource,omitempty"`
	State    StepState `json:"state"`
	// Undecided is true when the step's decision failed (an expression
	// failed at run time): it holds, and nothing after it is planned.
	Undecided bool     `json:"undecided,omitempty"`
	Actions   []Action `json:"actions,omitempty"`
	// Report is what the step reports while it is the next one: the
	// ContentDeleteSuccess condition, an Event, when to look again.
	Report *Report `json:"report,omitempty"`
}

// Verb is what an action does to its object.
type Verb string

// Verbs of actions. Stamp, label, unlabel, delete, force,
// recordUnconfirmed and removeFinalizer are writes; wait, keep and hold
// are not. An unlabel of the cluster namespace takes off the
// cluster-deleting label and the mark of governance
// (v1alpha1.GovernedNamespaceLabel and the policy's name) both.
const (
	VerbStamp             Verb = "stamp"
	VerbLabel             Verb = "label"
	VerbUnlabel           Verb = "unlabel"
	VerbDelete            Verb = "delete"
	VerbForce             Verb = "force"
	VerbRecordUnconfirmed Verb = "recordUnconfirmed"
	VerbRemoveFinalizer   Verb = "removeFinalizer"
	VerbWait              Verb = "wait"
	VerbKeep              Verb = "keep"
	VerbHold              Verb = "hold"
)

// Writes says whether the verb writes to the API server.
func (v Verb) Writes() bool {
	switch v {
	case VerbWait, VerbKeep, VerbHold:
		return false
	}
	return true
}

// Resources of the actions on the cluster and its namespace.
const (
	NamespacesResource      = "namespaces"
	ManagedClustersResource = "managedclusters.cluster.open-cluster-management.io"
)

// Action is what happens to one object in a step.
type Action struct {
	Verb Verb `json:"verb"`
	// Resource is resource.group, as kubectl names it.
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Group orders the actions of a step: group 0 before group 1 (a
	// stage's cleanup-priority groups); one group at a time is acted on.
	Group int `json:"group"`
	// Priority names a stage group's cleanup-priority.
	Priority string `json:"priority,omitempty"`
	// DeleteOption and Orphaned are what a stamp writes.
	DeleteOption string       `json:"deleteOption,omitempty"`
	Orphaned     []OrphanPlan `json:"orphaned,omitempty"`
	// Finalizer is the finalizer a force or removeFinalizer removes.
	Finalizer string `json:"finalizer,omitempty"`
	// For says what a wait waits for, why a hold holds, why a keep keeps.
	For string `json:"for,omitempty"`
	// Agent is what the work agent says of a work it is deleting: its
	// Deleting condition, where the agent writes one (OCM 1.1 and later).
	Agent string `json:"agent,omitempty"`
	// UID and ResourceVersion are the preconditions of the write: it
	// applies to this object only, and a work only as it was decided on.
	UID             types.UID `json:"uid,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	// Meta is the object acted on, for the executor.
	Meta *metav1.PartialObjectMetadata `json:"-"`
	// Option is the whole decision a stamp writes.
	Option *DeleteOption `json:"-"`
	// Objects are the works a recordUnconfirmed records (resource/name).
	Objects []string `json:"objects,omitempty"`
	// Annotations are the operator's annotations a removeFinalizer takes
	// off with the finalizer (a released cluster keeps none).
	Annotations []string `json:"annotations,omitempty"`
	// Collection, on the deletes of a stage group, says that the group goes
	// in one deletecollection request (collectable says when).
	Collection bool `json:"collection,omitempty"`
}

// Report is what a step reports while it is the next one.
type Report struct {
	// Done is true for the outcome: the condition becomes True.
	Done bool `json:"done,omitempty"`
	// Pending is true while the cleanup has not started (pre-cleanup
	// hooks hold it): the condition is Unknown.
	Pending bool   `json:"pending,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Event, when set, is the reason of an Event on the cluster; Action is
	// its action (events of one reason and action fold into one series).
	Event  string `json:"event,omitempty"`
	Action string `json:"eventAction,omitempty"`
	// Requeue is when to look again without an event; 0: on events only.
	Requeue metav1.Duration `json:"requeue,omitzero"`
	// WaitsOutside are the namespaces ("" for cluster-scoped objects)
	// outside the cluster namespace where the step waits for objects to
	// go: their events must be brought back to this cluster.
	WaitsOutside []string `json:"-"`
}

// Next is the step to take now; nil when there is none.
func (p *Plan) Next() *Step {
	for i := range p.Steps {
		if p.Steps[i].State == StateNext {
			return &p.Steps[i]
		}
	}
	return nil
}

// Admitted says whether the teardown has begun, or the plan's next step
// comes after its budget let it begin: not held, not a dry run, not
// suspended, and past the resume, the hooks and the blast radius. False
// for a nil plan.
func (p *Plan) Admitted() bool {
	switch {
	case p == nil:
		return false
	case p.Begun:
		return true
	case p.Held != "" || p.DryRun || p.Suspended != "":
		return false
	}
	next := p.Next()
	return next != nil && next.Kind != StepResumed && next.Kind != StepHooks && next.Kind != StepBlastRadius
}

// Now is what the operator writes in this reconcile: the write actions of
// the next step's first group. Nothing in a dry run, a held plan or a
// suspended one.
func (p *Plan) Now() []Action {
	s := p.Next()
	if s == nil || p.DryRun || p.Held != "" || p.Suspended != "" {
		return nil
	}
	first := -1
	var out []Action
	for _, a := range s.Actions {
		if first < 0 {
			first = a.Group
		}
		if a.Group != first {
			break
		}
		if a.Verb.Writes() {
			out = append(out, a)
		}
	}
	return out
}

// WorkPlan is the deleteOption decided for a ManifestWork.
type WorkPlan struct {
	Name string `json:"name"`
	// PropagationPolicy is Orphan, SelectivelyOrphan, or empty (the work's
	// default: its resources are deleted with it).
	PropagationPolicy string       `json:"propagationPolicy,omitempty"`
	Orphaned          []OrphanPlan `json:"orphaned,omitempty"`
	Error             string       `json:"error,omitempty"`
	// Unreachable says why the operator does not give the work the
	// decision above (an add-on's work, AddonUnreachable): a teardown
	// holds before deleting it.
	Unreachable string `json:"unreachable,omitempty"`
}

// OrphanPlan is one manifest left on the managed cluster, and the rule that
// keeps it.
type OrphanPlan struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Rule      string `json:"rule"`
}

// PrunePlan is the pruneObjectBehavior decided for a ConfigurationPolicy,
// or for a ConfigurationPolicy template of a Policy.
type PrunePlan struct {
	// Object is "ConfigurationPolicy <name>" or "Policy <name> template <name>".
	Object   string                 `json:"object"`
	Behavior v1alpha1.PruneBehavior `json:"behavior,omitempty"`
	// Ineffective is true when the behaviour has no effect (inform).
	Ineffective bool   `json:"ineffective,omitempty"`
	Error       string `json:"error,omitempty"`
	// HubTemplate, for a template that does not read its decision, is the
	// line that makes it do so.
	HubTemplate string `json:"hubTemplate,omitempty"`
}

// Orphan is one manifest to leave on the managed cluster: an orphaning rule
// of OCM's ManifestWork API.
type Orphan struct {
	Group, Resource, Namespace, Name string
}

// DeleteOption is the decision for one ManifestWork.
type DeleteOption struct {
	// PropagationPolicy is "", Orphan or SelectivelyOrphan. "" means the
	// operator owns no deleteOption: the work's default applies.
	PropagationPolicy string
	// Orphans are the manifests to keep, for SelectivelyOrphan, in manifest order.
	Orphans []Orphan
	// Rules names, per orphaned manifest, the rule that matched it.
	Rules []string
}

// Equal reports whether two decisions stamp the same deleteOption.
func (d DeleteOption) Equal(o DeleteOption) bool {
	if d.PropagationPolicy != o.PropagationPolicy || len(d.Orphans) != len(o.Orphans) {
		return false
	}
	for i := range d.Orphans {
		if d.Orphans[i] != o.Orphans[i] {
			return false
		}
	}
	return true
}

// Describe says what a deleteOption keeps, for people.
func (d DeleteOption) Describe() string {
	switch d.PropagationPolicy {
	case "":
		return "unset (Foreground)"
	case "Orphan":
		return "Orphan (every manifest stays on the managed cluster)"
	}
	var parts []string
	for i, o := range d.Orphans {
		part := o.Resource + "/" + o.Name
		if i < len(d.Rules) { // a decision names its rules; a value read from a work does not
			part += " by rule " + d.Rules[i]
		}
		parts = append(parts, part)
	}
	return "SelectivelyOrphan: " + strings.Join(parts, ", ")
}

// Groups splits a stage, already in deletion order, into the groups deleted
// one after the other.
func Groups(stage []Object) [][]Object {
	var out [][]Object
	for len(stage) > 0 {
		g := FirstGroup(stage)
		out = append(out, g)
		stage = stage[len(g):]
	}
	return out
}

// PriorityName names a deletion order: "unset", "invalid" or the value.
func PriorityName(o metav1.Object) string {
	switch n := DeletionOrder(o); n {
	case -2:
		return "unset"
	case -1:
		return "invalid"
	default:
		return strconv.Itoa(n)
	}
}

// WorkPlanOf turns an orphaning decision into its plan.
func WorkPlanOf(name string, d DeleteOption) WorkPlan {
	w := WorkPlan{Name: name, PropagationPolicy: d.PropagationPolicy}
	for i, o := range d.Orphans {
		w.Orphaned = append(w.Orphaned, OrphanPlan{Resource: o.Resource, Namespace: o.Namespace, Name: o.Name, Rule: d.Rules[i]})
	}
	return w
}

// SortWorks orders work plans by name.
func SortWorks(works []WorkPlan) {
	slices.SortFunc(works, func(a, b WorkPlan) int { return strings.Compare(a.Name, b.Name) })
}

// ResourceName names a resource as kubectl does: resource.group.
func ResourceName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}

// DryRunReport is what a dry run reports instead of acting: every step not
// done yet, as what would happen. A decision that failed is reported as in
// a teardown (CleanupFailed), not hidden in the plan.
func (p *Plan) DryRunReport() *Report {
	var parts []string
	for _, s := range p.Steps {
		if s.Undecided && s.Report != nil {
			return s.Report
		}
	}
	for _, s := range p.Steps {
		if s.State != StateDone {
			parts = append(parts, s.wouldDo(p.Cluster)...)
		}
	}
	return &Report{Reason: v1alpha1.DryRunReason, Event: v1alpha1.DryRunReason,
		Message: fmt.Sprintf("dry run, nothing is deleted (strategy %s): %s", p.Strategy, strings.Join(parts, "; "))}
}

// wouldDo says what a step would do, for a dry run.
func (s *Step) wouldDo(cluster string) []string {
	var holds []string
	for _, a := range s.Actions {
		if a.Verb == VerbHold {
			holds = append(holds, a.For)
		}
	}
	switch s.Kind {
	case StepOrphaning:
		return s.wouldOrphan(holds)
	case StepSignal:
		msg := fmt.Sprintf("would label namespace %s %s=true", cluster, v1alpha1.ClusterDeletingLabel)
		switch work := s.work(); {
		case len(holds) > 0:
			msg += "; would hold: " + holds[0]
		case work != nil:
			msg += " and delete the deletion-signal work " + work.Name
		}
		return []string{msg}
	case StepGate:
		if len(holds) > 0 {
			return []string{"would hold: " + holds[0]}
		}
		if s.Report != nil {
			return []string{"would wait: " + s.Report.Message}
		}
		if len(s.Actions) == 0 {
			// Nothing monitored is there: the gate has nothing to wait for.
			return nil
		}
		return []string{fmt.Sprintf("would wait for %d monitored object(s) to be removed by their controllers: %s", len(s.Actions), Bounded(s.Objects(), ", "))}
	case StepStage:
		if len(holds) > 0 {
			return []string{"would hold: " + holds[0]}
		}
		if len(s.Actions) == 0 {
			return nil
		}
		resource, _, _ := strings.Cut(s.Resource, ".")
		return []string{fmt.Sprintf("stage %s would delete %d %s: %s", s.Name, len(s.Objects()), resource, Bounded(s.Objects(), ", "))}
	case StepNamespace:
		if len(holds) > 0 {
			return []string{"would hold: " + holds[0]}
		}
		for _, a := range s.Actions {
			if a.Verb == VerbDelete {
				return []string{"would delete namespace " + a.Name}
			}
			return []string{"would keep namespace " + a.Name}
		}
	}
	return nil
}

// wouldOrphan says what the orphaning step would do, for a dry run.
func (s *Step) wouldOrphan(holds []string) []string {
	var out []string
	waits := 0
	for _, a := range s.Actions {
		switch {
		case a.Verb == VerbStamp:
			want := DeleteOption{PropagationPolicy: a.DeleteOption}
			if a.Option != nil {
				want = *a.Option
			}
			out = append(out, fmt.Sprintf("would set %s deleteOption %s", a.key(), want.Describe()))
		case a.Verb == VerbWait:
			waits++
		}
	}
	if waits > 0 {
		out = append(out, fmt.Sprintf("would wait for the work agent to apply the deleteOption of %d ManifestWork(s)", waits))
	}
	if len(holds) > 0 {
		out = append(out, "would hold: "+Bounded(holds, "; "))
	}
	return out
}

// work is the object of a step's first action on an object in the cluster
// namespace.
func (s *Step) work() *Action {
	for i := range s.Actions {
		if s.Actions[i].Namespace != "" {
			return &s.Actions[i]
		}
	}
	return nil
}

// Objects are the objects a step acts on (resource/name), each once: an
// object can be deleted, then forced.
func (s *Step) Objects() []string {
	out := make([]string, 0, len(s.Actions))
	for _, a := range s.Actions {
		if k := a.key(); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// key names an action's object as messages do: resource/name.
func (a Action) key() string {
	resource, _, _ := strings.Cut(a.Resource, ".")
	return resource + "/" + a.Name
}

// MaxNamed bounds the objects a message names.
const MaxNamed = 5

// Bounded joins up to MaxNamed items with sep, and says how many more
// there are.
func Bounded(items []string, sep string) string {
	if len(items) <= MaxNamed {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:MaxNamed], sep) + fmt.Sprintf(" and %d more", len(items)-MaxNamed)
}

// Keys are the objects' keys (resource/name).
func Keys(objs []Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Key()
	}
	return out
}

// OrphaningHeld is the report of works whose deleteOption cannot be
// decided or written.
func OrphaningHeld(holds []string) *Report {
	return held(fmt.Sprintf("held, nothing more is deleted: the deleteOption of %d ManifestWork(s) cannot be decided or written: %s",
		len(holds), Bounded(holds, "; ")), "", 0)
}
