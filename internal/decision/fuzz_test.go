package decision_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/fuzzrand"
)

// FuzzTeardownPlan decides the teardown of a random cluster under a random
// policy: strategy, signal, gate, stages, namespace, and each work's
// orphaning and each ConfigurationPolicy's prune decision. The bytes drive
// the choices (see fuzzrand.New); expr is used as one of the policy's
// expressions wherever the choices put it.
//
// Properties, for every input:
//
//   - nothing panics; a strategy that fails holds the whole plan (no
//     step, no write);
//
//   - the plan (PlanTeardown) is of the cluster it was asked for; its steps
//     come in order, done ones, then at most one next, then later ones;
//     every action names one of the cluster's objects, and a namespace only
//     when it is named after the cluster: never another namespace;
//
//   - never a write outside the plan: what the operator writes now
//     (Plan.Now) is a write of the next step's first group, nothing in a
//     dry run; no monitored object is deleted by a stage, no work is
//     deleted before the orphaning step is done, and no finalizer is
//     removed from an object that is not being deleted, unless the same
//     step deletes it first;
//
//   - the strategy is a valid one;
//
//   - the deletion-signal work is in no stage;
//
//   - every staged object is one of the cluster's, of the stage's resource,
//     in at most one stage, in OCM's cleanup-priority order;
//
//   - monitored objects are never deleted: whenever the gate holds nothing,
//     no object that a monitoredResources entry matches is in a stage;
//
//   - an orphaning decision is Orphan when every manifest is orphaned,
//     SelectivelyOrphan when some are, none when none are, each orphan
//     named by a rule of the policy, and nothing when a rule fails;
//
//   - a prune decision is a valid behaviour, or none without a prune section.
//
//   - the deleteOption a teardown requires before deleting a work
//     (TeardownOrphaning) is Orphan for every work under Needless, whatever
//     the rules say; nothing for the current signal work otherwise; the
//     rules' decision for the rest.
//
// That no work is deleted before the work agent applied that deleteOption
// is the plan's too (its orphaning step waits for the agent's Applied
// condition); the fuzzer checks that no work is deleted while that step is
// not done. That the executor writes only what the plan lists, and that a
// real agent confirms, the envtest suite, the crash harness (test/crash,
// property orphan-first) and test/e2e check.
func FuzzTeardownPlan(f *testing.F) {
	// The scenarios worth keeping (Needless with orphaning rules, the
	// signal work among staged works, a monitored resource that is also a
	// stage, a namespace named otherwise...) are in testdata/fuzz.
	for _, expr := range []string{"", "cluster.metadata.labels[?'tier'].orValue('') == 'sandbox'", "object.metadata.labels['app'] == 'x'"} {
		f.Add([]byte{}, expr)
	}
	env := untypedEnv(f)
	f.Fuzz(func(t *testing.T, data []byte, expr string) {
		in := newFleet(fuzzrand.New(data), expr)
		checkTeardown(t, env, in)
	})
}

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// untypedEnv is the environment without the OCM schemas: cluster, work,
// manifest and policy are dynamic, object and namespace typed by metadata.
func untypedEnv(tb testing.TB) *cel.Env {
	envOnce.Do(func() { env, envErr = cel.NewEnv(cel.Schemas{}) })
	if envErr != nil {
		tb.Fatal(envErr)
	}
	return env
}

func checkTeardown(t *testing.T, env *cel.Env, in *fleet) {
	t.Helper()
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 1}, Spec: in.spec})
	if len(errs) > 0 {
		if p != nil {
			t.Fatalf("a policy that does not compile was returned: %v", errs.ToAggregate())
		}
		return
	}
	cluster := map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": in.cluster, "labels": in.labels}}
	a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), cluster)

	snap := in.snapshot(t)
	plan := decision.PlanTeardown(&decision.Governed{Cluster: snap.Cluster, Policy: p, Activation: a}, snap)
	strategy, strategyErr := decision.Strategy(p, a)
	holding, gateErr := decision.Gate(p, a, in.objects)
	stages := decision.Stages(p)
	signal := decision.SignalWorkName(p)
	assigned, stagesErr := decision.AssignStages(p, a, stages, in.objects, nil, func(o decision.Object) bool {
		return o.GVR == decision.ManifestWorks && signal != "" && o.Meta.Name == signal
	})

	checkPlan(t, p, a, in, plan, strategy, strategyErr)
	if strategyErr == nil && !slices.Contains(v1alpha1.RemoveStrategyTypes, strategy) {
		t.Fatalf("strategy %q is not a valid one", strategy)
	}

	if gateErr == nil {
		checkGate(t, p, a, in, holding)
	} else if holding != nil {
		t.Fatalf("a failed gate returned objects: %v", gateErr)
	}
	if stagesErr == nil {
		checkStages(t, in, stages, assigned, signal)
		if gateErr == nil && len(holding) == 0 {
			checkNoMonitoredStaged(t, p, a, assigned)
		}
	} else if assigned != nil {
		t.Fatalf("a failed stage assignment returned stages: %v", stagesErr)
	}

	for name, manifests := range in.manifests {
		work := map[string]any{"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": name, "namespace": in.cluster}}
		checkOrphaning(t, p, a, work, manifests)
		if strategyErr == nil {
			checkTeardownOrphaning(t, p, a, strategy, work, manifests)
		}
	}
	for _, cp := range in.configurationPolicies {
		b, err := decision.PruneBehavior(p, a, cp)
		switch {
		case err != nil:
			if b != "" {
				t.Fatalf("a failed prune decision returned %q", b)
			}
		case in.spec.Prune == nil:
			if b != "" {
				t.Fatalf("a policy without prune decided %q", b)
			}
		case !slices.Contains(v1alpha1.PruneBehaviors, b):
			t.Fatalf("prune behaviour %q is not a valid one", b)
		}
		if decision.Ineffective(b, cp) && (b == "" || b == v1alpha1.PruneNone) {
			t.Fatalf("%q reported as ineffective", b)
		}
	}
}

func checkPlan(t *testing.T, p *cel.Policy, a *cel.Activation, in *fleet, plan *decision.Plan, strategy v1alpha1.RemoveStrategyType, strategyErr error) {
	t.Helper()
	if plan.Cluster != in.cluster {
		t.Fatalf("plan of cluster %q, want %q", plan.Cluster, in.cluster)
	}
	if strategyErr != nil {
		if plan.Held == "" || len(plan.Steps) > 0 || len(plan.Now()) > 0 {
			t.Fatalf("the strategy fails (%v), yet the plan is not held: %+v", strategyErr, plan)
		}
		return
	}
	if plan.Strategy != strategy {
		t.Fatalf("plan strategy %q, the policy decides %q", plan.Strategy, strategy)
	}
	checkStepOrder(t, plan)
	signal := decision.SignalWorkName(p)
	works := decision.ResourceName(decision.ManifestWorks)
	for _, st := range plan.Steps {
		for _, act := range st.Actions {
			checkAction(t, in, st, act)
			if st.Kind == decision.StepStage && act.Resource == works && signal != "" && act.Name == signal {
				t.Fatalf("the deletion-signal work %s is planned in stage %s", signal, st.Name)
			}
		}
	}
	checkNow(t, p, a, in, plan)
}

// checkStepOrder: the steps come in their order, done ones first, then at
// most one next, then later ones; a held plan has none.
func checkStepOrder(t *testing.T, plan *decision.Plan) {
	t.Helper()
	order := []decision.StepKind{decision.StepOrphaning, decision.StepSignal, decision.StepGate, decision.StepStage,
		decision.StepNamespace, decision.StepFinish}
	state, kind := 0, 0
	states := []decision.StepState{decision.StateDone, decision.StateNext, decision.StateLater}
	for _, st := range plan.Steps {
		k := slices.Index(order, st.Kind)
		if k < kind {
			t.Fatalf("step %s after %s", st.Kind, order[kind])
		}
		kind = k
		sv := slices.Index(states, st.State)
		if sv < state || (st.State == decision.StateNext && state == 1) || sv < 0 {
			t.Fatalf("step %s is %s after a step %s", st.Kind, st.State, states[state])
		}
		state = max(sv, state)
		if st.State == decision.StateNext {
			state = 2
		}
	}
}

// checkAction: every action names one of the cluster's objects, and a
// namespace only when it is the cluster's: never another namespace.
func checkAction(t *testing.T, in *fleet, st decision.Step, act decision.Action) {
	t.Helper()
	switch act.Resource {
	case decision.NamespacesResource:
		if act.Name != in.cluster {
			t.Fatalf("step %s: %s namespace %q of cluster %q: never a namespace not named after the cluster", st.Kind, act.Verb, act.Name, in.cluster)
		}
		return
	case decision.ManagedClustersResource:
		if act.Name != in.cluster {
			t.Fatalf("step %s: %s cluster %q, the plan is of %q", st.Kind, act.Verb, act.Name, in.cluster)
		}
		return
	case "":
		if act.Verb != decision.VerbHold {
			t.Fatalf("step %s: %s of nothing", st.Kind, act.Verb)
		}
		return
	}
	for _, objs := range in.objects {
		for _, o := range objs {
			if o.Meta.UID == act.UID && o.Meta.Name == act.Name && decision.ResourceName(o.GVR) == act.Resource {
				if act.Namespace != in.cluster {
					t.Fatalf("step %s: %s of %s in namespace %q", st.Kind, act.Verb, act.Name, act.Namespace)
				}
				return
			}
		}
	}
	t.Fatalf("step %s: %s of %s %s, which is not one of the cluster's objects", st.Kind, act.Verb, act.Resource, act.Name)
}

// checkNow: what the operator writes now are writes of the next step's
// first group, and nothing in a dry run: never a delete outside the plan.
// No monitored object is deleted, and no work is deleted while the
// orphaning step is not done.
func checkNow(t *testing.T, p *cel.Policy, a *cel.Activation, in *fleet, plan *decision.Plan) {
	t.Helper()
	now := plan.Now()
	next := plan.Next()
	if len(now) > 0 && (next == nil || plan.DryRun) {
		t.Fatalf("writes %+v without a next step, or in a dry run", now)
	}
	for _, act := range now {
		if !act.Verb.Writes() || !slices.ContainsFunc(next.Actions, func(x decision.Action) bool {
			return x.Verb == act.Verb && x.UID == act.UID && x.Name == act.Name && x.Group == act.Group
		}) || act.Group != now[0].Group {
			t.Fatalf("%s of %s is not a write of the next step's first group", act.Verb, act.Name)
		}
		if act.Verb == decision.VerbForce && act.Meta.DeletionTimestamp == nil && !slices.ContainsFunc(now, func(x decision.Action) bool {
			return x.Verb == decision.VerbDelete && x.UID == act.UID
		}) {
			t.Fatalf("the work agent's finalizer of %s, which is not being deleted, is removed without deleting it first", act.Name)
		}
		if act.Verb != decision.VerbDelete || next.Kind != decision.StepStage {
			continue
		}
		for _, m := range decision.MonitoredResources(p) {
			for _, o := range in.objects[m.GVR] {
				if o.Meta.UID == act.UID && monitored(t, m, a, o) {
					t.Fatalf("monitored object %s would be deleted", o.Key())
				}
			}
		}
		if act.Resource == decision.ResourceName(decision.ManifestWorks) && plan.Steps[0].State != decision.StateDone {
			t.Fatalf("work %s deleted while the orphaning step is %s", act.Name, plan.Steps[0].State)
		}
	}
}

// checkGate: the gate holds exactly the objects a monitored entry matches.
func checkGate(t *testing.T, p *cel.Policy, a *cel.Activation, in *fleet, holding []decision.Object) {
	t.Helper()
	want := 0
	for _, m := range decision.MonitoredResources(p) {
		for _, o := range in.objects[m.GVR] {
			if monitored(t, m, a, o) {
				want++
			}
		}
	}
	if len(holding) != want {
		t.Fatalf("the gate holds %d objects, %d are monitored", len(holding), want)
	}
	for _, o := range holding {
		if !slices.ContainsFunc(decision.MonitoredResources(p), func(m decision.Monitored) bool { return m.GVR == o.GVR }) {
			t.Fatalf("the gate holds %s, which no monitored resource names", o.Key())
		}
	}
}

func monitored(t *testing.T, m decision.Monitored, a *cel.Activation, o decision.Object) bool {
	if o.GVR != m.GVR {
		return false
	}
	if m.When == nil {
		return true
	}
	ok, err := m.When.Bool(a.With(cel.VarObject, o.Value))
	if err != nil {
		t.Fatalf("the gate succeeded where %s fails for %s: %v", m.When.Path, o.Key(), err)
	}
	return ok
}

// checkNoMonitoredStaged: with the gate open, no stage holds an object that
// a monitored entry matches; the stages would delete it.
func checkNoMonitoredStaged(t *testing.T, p *cel.Policy, a *cel.Activation, assigned [][]decision.Object) {
	t.Helper()
	for _, objs := range assigned {
		for _, o := range objs {
			for _, m := range decision.MonitoredResources(p) {
				if monitored(t, m, a, o) {
					t.Fatalf("monitored object %s would be deleted: the gate holds nothing", o.Key())
				}
			}
		}
	}
}

func checkStages(t *testing.T, in *fleet, stages []decision.Stage, assigned [][]decision.Object, signal string) {
	t.Helper()
	if len(assigned) != len(stages) {
		t.Fatalf("%d stages assigned, %d declared", len(assigned), len(stages))
	}
	staged := map[string]string{}
	for i, objs := range assigned {
		for j, o := range objs {
			key := o.GVR.String() + "/" + o.Meta.Name
			if prev, ok := staged[key]; ok {
				t.Fatalf("%s is in stage %s and stage %s", o.Key(), prev, stages[i].Name)
			}
			staged[key] = stages[i].Name
			if o.GVR != stages[i].GVR {
				t.Fatalf("%s (%s) is in stage %s of %s", o.Key(), o.GVR, stages[i].Name, stages[i].GVR)
			}
			if !slices.ContainsFunc(in.objects[o.GVR], func(x decision.Object) bool { return x.Meta == o.Meta }) {
				t.Fatalf("%s is not one of the cluster's objects", o.Key())
			}
			if o.Meta.Namespace != in.cluster {
				t.Fatalf("%s of namespace %s is staged for cluster %s", o.Key(), o.Meta.Namespace, in.cluster)
			}
			if o.GVR == decision.ManifestWorks && signal != "" && o.Meta.Name == signal {
				t.Fatalf("the deletion-signal work %s is in stage %s", signal, stages[i].Name)
			}
			if j > 0 {
				prev := objs[j-1]
				if decision.DeletionOrder(prev.Meta) > decision.DeletionOrder(o.Meta) {
					t.Fatalf("stage %s deletes %s (priority %s) before %s (priority %s)", stages[i].Name,
						prev.Key(), decision.PriorityName(prev.Meta), o.Key(), decision.PriorityName(o.Meta))
				}
			}
		}
		n := 0
		for _, g := range decision.Groups(objs) {
			for _, o := range g {
				if decision.DeletionOrder(o.Meta) != decision.DeletionOrder(g[0].Meta) {
					t.Fatalf("group of %s holds %s of another priority", g[0].Key(), o.Key())
				}
			}
			n += len(g)
		}
		if n != len(objs) {
			t.Fatalf("the groups of stage %s hold %d objects, the stage %d", stages[i].Name, n, len(objs))
		}
	}
}

var errUnknownKind = errors.New("no resource known for this kind")

// checkTeardownOrphaning: under Needless every work, signal works included,
// must carry Orphan before it is deleted, whatever the rules decide (they
// are not even asked); under the other strategies the current signal work
// carries nothing and the rest what the rules decide.
func checkTeardownOrphaning(t *testing.T, p *cel.Policy, a *cel.Activation, strategy v1alpha1.RemoveStrategyType, work map[string]any, manifests []map[string]any) {
	t.Helper()
	rules := func() (decision.DeleteOption, error) {
		return decision.Orphaning(p, a, work, manifests, func(_ int, gvk schema.GroupVersionKind) (string, error) {
			if gvk.Kind == "Unknown" || gvk.Kind == "" {
				return "", errUnknownKind
			}
			return strings.ToLower(gvk.Kind) + "s", nil
		})
	}
	for _, role := range []decision.SignalRole{decision.NotSignal, decision.CurrentSignal, decision.RetiredSignal} {
		asked := false
		d, err := decision.TeardownOrphaning(strategy, role, func() (decision.DeleteOption, error) { asked = true; return rules() })
		switch {
		case strategy == v1alpha1.RemoveStrategyNeedless:
			if err != nil || d.PropagationPolicy != "Orphan" || len(d.Orphans) != 0 || asked {
				t.Fatalf("Needless requires %+v (err %v, rules asked %v) of a work in role %d: every work must be Orphan", d, err, asked, role)
			}
		case role == decision.CurrentSignal:
			if err != nil || d.PropagationPolicy != "" || asked {
				t.Fatalf("the current signal work gets %+v under %s: its deletion is the signal", d, strategy)
			}
		case role == decision.RetiredSignal:
			if err != nil || d.PropagationPolicy != "Orphan" {
				t.Fatalf("a retired signal work gets %+v under %s: its deletion must not signal", d, strategy)
			}
		default:
			want, wantErr := rules()
			if (err == nil) != (wantErr == nil) || !d.Equal(want) {
				t.Fatalf("under %s a work gets %+v (%v), the rules decide %+v (%v)", strategy, d, err, want, wantErr)
			}
		}
	}
}

func checkOrphaning(t *testing.T, p *cel.Policy, a *cel.Activation, work map[string]any, manifests []map[string]any) {
	t.Helper()
	d, err := decision.Orphaning(p, a, work, manifests, func(_ int, gvk schema.GroupVersionKind) (string, error) {
		if gvk.Kind == "Unknown" || gvk.Kind == "" {
			return "", errUnknownKind
		}
		return strings.ToLower(gvk.Kind) + "s", nil
	})
	if err != nil {
		if d.PropagationPolicy != "" || d.Orphans != nil || d.Rules != nil {
			t.Fatalf("a failed orphaning decision stamps %+v: %v", d, err)
		}
		return
	}
	for _, rule := range d.Rules {
		if !slices.ContainsFunc(p.Spec.Orphaning, func(r v1alpha1.OrphaningRule) bool { return r.Name == rule }) {
			t.Fatalf("manifest orphaned by rule %q, which the policy does not have", rule)
		}
	}
	switch d.PropagationPolicy {
	case "":
		if len(d.Orphans) != 0 || len(d.Rules) != 0 {
			t.Fatalf("no deleteOption, yet orphans: %+v", d)
		}
	case "Orphan":
		if len(d.Orphans) != 0 || len(d.Rules) != len(manifests) || len(manifests) == 0 {
			t.Fatalf("Orphan for %d of %d manifests: %+v", len(d.Rules), len(manifests), d)
		}
	case "SelectivelyOrphan":
		if len(d.Orphans) == 0 || len(d.Orphans) >= len(manifests) || len(d.Rules) != len(d.Orphans) {
			t.Fatalf("SelectivelyOrphan for %d of %d manifests: %+v", len(d.Orphans), len(manifests), d)
		}
	default:
		t.Fatalf("propagation policy %q", d.PropagationPolicy)
	}
	if len(p.Orphaning) == 0 && d.PropagationPolicy != "" {
		t.Fatalf("no orphaning rule, yet %s", d.PropagationPolicy)
	}
}
