package decision_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

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

// fleet is one generated input: a policy, a cluster and what its namespace
// holds.
type fleet struct {
	spec      v1alpha1.CleanupPolicySpec
	cluster   string
	labels    map[string]any
	available bool
	namespace map[string]any // nil: no namespace
	objects   map[schema.GroupVersionResource][]decision.Object
	// manifests are the manifests of each work, by work name.
	manifests map[string][]map[string]any
	// configurationPolicies are ConfigurationPolicies of the namespace.
	configurationPolicies []map[string]any
	// now is the time of the decision, since the cluster was deleted.
	now time.Duration
	// memory is what an executor remembers of its writes.
	memory decision.Memory
	// applied are the works whose agent applied their generation.
	applied map[string]bool
}

var (
	configMaps         = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	clusterDeployments = schema.GroupVersionResource{Group: "hive.openshift.io", Version: "v1", Resource: "clusterdeployments"}
	resourcePool       = []schema.GroupVersionResource{decision.ManifestWorks, decision.ManagedClusterAddOns, configMaps, clusterDeployments}
)

// Expressions of each field, well formed; some fail at run time on some
// objects (a missing key), and some name a variable the field does not bind.
var (
	clusterExprs = []string{
		"cluster.metadata.labels[?'tier'].orValue('') == 'sandbox'",
		"cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		"cluster.metadata.name.startsWith('c')",
		"cluster.metadata.labels['tier'] == 'sandbox'",
		"size(cluster.metadata.labels) > 1",
		"true", "false",
	}
	objectExprs = []string{
		"object.metadata.name.startsWith('hold')",
		"object.metadata.labels[?'app'].hasValue()",
		"!object.metadata.name.endsWith('-klusterlet')",
		"object.metadata.annotations[?'open-cluster-management.io/cleanup-priority'].orValue('') == '1'",
		"object.metadata.labels['app'] == 'web'",
		"has(object.metadata.deletionTimestamp)",
		"object.metadata.name == cluster.metadata.name",
		"true", "false",
	}
	namespaceExprs = []string{
		"namespace.metadata.labels[?'keep'].orValue('') == 'true'",
		"namespace.metadata.labels['keep'] == 'true'",
		"namespace.metadata.name == cluster.metadata.name",
		"true", "false",
	}
	manifestExprs = []string{
		"manifest.kind == 'CustomResourceDefinition'",
		"work.metadata.labels[?'legacy'].orValue('') == 'true'",
		"manifest.metadata.name.startsWith('keep')",
		"manifest.spec.replicas == 1",
		"manifest.kind == 'Namespace' || manifest.kind == 'CustomResourceDefinition'",
		"true", "false",
	}
	policyExprs = []string{
		"policy.metadata.labels[?'cleanup'].orValue('') == 'strict'",
		"policy.spec.remediationAction.lowerAscii() == 'enforce'",
		"true",
	}
	names      = []string{"a", "b", "hold-1", "hold-2", "web", "x-klusterlet", "cleanup-signal", "signal", "keep-me", "app"}
	priorities = []string{"", "", "0", "1", "1", "50", "100", "101", "-1", "high"}
	kinds      = []string{"ConfigMap", "Deployment", "CustomResourceDefinition", "Namespace", "Unknown", ""}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// expression returns an expression of the pool, or sometimes the fuzzer's.
func expression(r *rand.Rand, pool []string, expr string) string {
	if expr != "" && r.IntN(6) == 0 {
		return expr
	}
	return pick(r, pool)
}

func newFleet(r *rand.Rand, expr string) *fleet {
	in := &fleet{
		cluster:   pick(r, []string{"c1", "cluster-a", "prod-eu-1"}),
		labels:    map[string]any{},
		available: r.IntN(2) == 0,
		objects:   map[schema.GroupVersionResource][]decision.Object{},
		manifests: map[string][]map[string]any{},
	}
	for range r.IntN(4) {
		in.labels[pick(r, []string{"tier", "env", "legacy", "keep"})] = pick(r, []string{"sandbox", "prod", "true", ""})
	}

	s := &in.spec
	if r.IntN(4) == 0 {
		s.ClusterSelector = expression(r, clusterExprs, expr)
	}
	for i := range r.IntN(3) {
		s.Variables = append(s.Variables, v1alpha1.Variable{Name: fmt.Sprintf("v%d", i), Expression: expression(r, []string{
			"cluster.metadata.labels[?'tier'].orValue('standard')", "cluster.metadata.name", "size(cluster.metadata.labels)"}, expr)})
	}
	s.RemoveStrategy.Default = pick(r, v1alpha1.RemoveStrategyTypes)
	for range r.IntN(3) {
		when := expression(r, clusterExprs, expr)
		if len(s.Variables) > 0 && r.IntN(4) == 0 {
			when = "variables.v0 == 'sandbox'"
		}
		s.RemoveStrategy.Rules = append(s.RemoveStrategy.Rules, v1alpha1.StrategyRule{When: when, Strategy: pick(r, v1alpha1.RemoveStrategyTypes)})
	}
	if r.IntN(3) == 0 {
		s.RemoveStrategy.Timeout = &metav1.Duration{Duration: time.Duration(1+r.IntN(120)) * time.Minute}
	}
	for range r.IntN(3) {
		m := v1alpha1.MonitoredResource{GroupVersionResource: apiGVR(pick(r, resourcePool))}
		if r.IntN(2) == 0 {
			m.When = expression(r, objectExprs, expr)
		}
		s.MonitoredResources = append(s.MonitoredResources, m)
	}
	for i := range r.IntN(4) {
		st := v1alpha1.DeletionStage{Name: fmt.Sprintf("s%d", i), GroupVersionResource: apiGVR(pick(r, resourcePool))}
		if r.IntN(2) == 0 {
			st.When = expression(r, objectExprs, expr)
		}
		s.DeletionStages = append(s.DeletionStages, st)
	}
	if r.IntN(2) == 0 {
		s.KeepNamespace = expression(r, namespaceExprs, expr)
	}
	if r.IntN(2) == 0 {
		s.DeletionSignal = &v1alpha1.DeletionSignal{WorkName: pick(r, []string{"", "cleanup-signal", "signal", "web"})}
	}
	for i := range r.IntN(3) {
		s.Orphaning = append(s.Orphaning, v1alpha1.OrphaningRule{Name: fmt.Sprintf("r%d", i), When: expression(r, manifestExprs, expr)})
	}
	if r.IntN(3) == 0 {
		s.Prune = &v1alpha1.Prune{Default: pick(r, append([]v1alpha1.PruneBehavior{""}, v1alpha1.PruneBehaviors...))}
		for range r.IntN(3) {
			s.Prune.Rules = append(s.Prune.Rules, v1alpha1.PruneRule{When: expression(r, policyExprs, expr), Behavior: pick(r, v1alpha1.PruneBehaviors)})
		}
	}
	s.DryRun = r.IntN(5) == 0

	// The namespace: mostly the cluster's, sometimes none, sometimes one
	// named otherwise (which must never be planned for deletion).
	switch r.IntN(8) {
	case 0:
	case 1:
		in.namespace = map[string]any{"metadata": map[string]any{"name": pick(r, []string{"other", "", "kube-system", in.cluster + "x"})}}
	case 2:
		in.namespace = map[string]any{"metadata": map[string]any{}}
	default:
		labels := map[string]any{}
		if r.IntN(2) == 0 {
			labels["keep"] = pick(r, []string{"true", "false"})
		}
		in.namespace = map[string]any{"metadata": map[string]any{"name": in.cluster, "labels": labels}}
	}

	for _, gvr := range resourcePool {
		seen := map[string]bool{}
		for range r.IntN(6) {
			name := pick(r, names)
			if seen[name] {
				continue
			}
			seen[name] = true
			in.objects[gvr] = append(in.objects[gvr], newObject(r, gvr, in.cluster, name))
		}
	}
	for _, w := range in.objects[decision.ManifestWorks] {
		var ms []map[string]any
		for range r.IntN(4) {
			m := map[string]any{"apiVersion": pick(r, []string{"v1", "apps/v1", "apiextensions.k8s.io/v1", "a/b/c", ""}), "kind": pick(r, kinds)}
			md := map[string]any{"name": pick(r, names)}
			if r.IntN(2) == 0 {
				md["namespace"] = pick(r, []string{"default", "kube-system"})
			}
			m["metadata"] = md
			if r.IntN(3) == 0 {
				m["spec"] = map[string]any{"replicas": int64(r.IntN(3))}
			}
			ms = append(ms, m)
		}
		in.manifests[w.Meta.Name] = ms
	}
	for range r.IntN(3) {
		cp := map[string]any{"metadata": map[string]any{"name": pick(r, names), "namespace": in.cluster,
			"labels": map[string]any{"cleanup": pick(r, []string{"strict", "loose"})}}}
		if r.IntN(4) != 0 {
			cp["spec"] = map[string]any{"remediationAction": pick(r, []string{"enforce", "inform", "Enforce"})}
		}
		in.configurationPolicies = append(in.configurationPolicies, cp)
	}
	in.now = time.Duration(r.IntN(180)) * time.Minute
	in.memory = decision.Memory{Stamped: map[types.UID]int64{}, Restamps: map[types.UID]int{}, Deleted: map[types.UID]bool{}, Forced: map[types.UID]bool{}}
	in.applied = map[string]bool{}
	for _, objs := range in.objects {
		for _, o := range objs {
			switch r.IntN(8) {
			case 0:
				in.memory.Deleted[o.Meta.UID] = true
			case 1:
				in.memory.Forced[o.Meta.UID] = true
			case 2:
				in.memory.Stamped[o.Meta.UID] = int64(1 + r.IntN(3))
				in.memory.Restamps[o.Meta.UID] = r.IntN(6)
			}
			in.applied[o.Meta.Name] = r.IntN(2) == 0
			if r.IntN(2) == 0 {
				o.Meta.Finalizers = []string{v1alpha1.WorkAgentFinalizer}
			}
		}
	}
	return in
}

// snapshot is the fleet as the reader gives it to the plan.
func (in *fleet) snapshot(t *testing.T) *decision.Snapshot {
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	status := "False"
	if in.available {
		status = "True"
	}
	cluster := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": in.cluster, "labels": in.labels, "uid": "cluster-uid"},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "ManagedClusterConditionAvailable", "status": status}}}}}
	cluster.SetDeletionTimestamp(&deleted)
	s := &decision.Snapshot{Cluster: cluster, Objects: in.objects, Works: map[types.UID]*workv1.ManifestWork{},
		Now: deleted.Add(in.now), Memory: in.memory, Unserved: map[schema.GroupVersionResource]bool{},
		ResourceOf: func(gvk schema.GroupVersionKind) (string, error) {
			if gvk.Kind == "Unknown" || gvk.Kind == "" {
				return "", errUnknownKind
			}
			return strings.ToLower(gvk.Kind) + "s", nil
		}}
	if in.namespace != nil {
		s.Namespace = &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(in.namespace, s.Namespace); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range in.objects[decision.ManifestWorks] {
		s.Works[o.Meta.UID] = in.work(t, o)
	}
	return s
}

// work is a work whole: its metadata, its manifests and, maybe, the agent's
// report that it applied them.
func (in *fleet) work(t *testing.T, o decision.Object) *workv1.ManifestWork {
	w := &workv1.ManifestWork{ObjectMeta: o.Meta.ObjectMeta}
	w.Generation = 2
	for _, m := range in.manifests[o.Meta.Name] {
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	if in.applied[o.Meta.Name] {
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, ObservedGeneration: 2}}
	}
	return w
}

func apiGVR(g schema.GroupVersionResource) v1alpha1.GroupVersionResource {
	return v1alpha1.GroupVersionResource{Group: g.Group, Version: g.Version, Resource: g.Resource}
}

// newObject is an object as the operator's metadata-only reads give it.
func newObject(r *rand.Rand, gvr schema.GroupVersionResource, namespace, name string) decision.Object {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(gvr.Resource + "/" + name)}}
	if p := pick(r, priorities); p != "" {
		m.Annotations = map[string]string{"open-cluster-management.io/cleanup-priority": p}
	}
	if r.IntN(3) == 0 {
		m.Labels = map[string]string{pick(r, []string{"app", "legacy"}): pick(r, []string{"web", "true"})}
	}
	if gvr == decision.ManifestWorks && r.IntN(6) == 0 {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[v1alpha1.SignalWorkLabel] = "true"
	}
	if r.IntN(5) == 0 {
		ts := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		m.DeletionTimestamp = &ts
	}
	value, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		panic(err)
	}
	return decision.Object{GVR: gvr, Meta: m, Value: value}
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
	assigned, stagesErr := decision.AssignStages(p, a, stages, in.objects, func(o decision.Object) bool {
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
