package decision

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
