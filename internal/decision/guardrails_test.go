package decision_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

func TestResolveSuspended(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	all := compile(t, env, "all", 0, "")
	high := compile(t, env, "high", 10, "cluster.metadata.labels[?'env'].orValue('') == 'prod'")
	suspended := func(p *cel.Policy) *cel.Policy {
		c := *p
		spec := *p.Spec
		spec.Suspend = true
		c.Spec = &spec
		return &c
	}
	paused := func(c *unstructured.Unstructured) *unstructured.Unstructured {
		a := c.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.PausedAnnotation] = "true"
		c.SetAnnotations(a)
		return c
	}
	prod := func(name string) *unstructured.Unstructured {
		return cluster(name, "1", map[string]string{"env": "prod"})
	}
	for _, tc := range []struct {
		name      string
		in        decision.Input
		suspended string // a substring; "" for none
	}{
		{name: "an active governor", in: decision.Input{Cluster: prod("c1"), Ranked: decision.Ranked([]*cel.Policy{all, high})}},
		{name: "a suspended governor", in: decision.Input{Cluster: prod("c2"), Ranked: decision.Ranked([]*cel.Policy{all, suspended(high)})},
			suspended: "suspended by CleanupPolicy high (spec.suspend)"},
		{name: "a paused cluster under an active governor", in: decision.Input{Cluster: paused(prod("c3")), Ranked: decision.Ranked([]*cel.Policy{all, high})},
			suspended: "paused by the annotation " + v1alpha1.PausedAnnotation},
		{name: "a paused cluster no policy governs", in: decision.Input{Cluster: paused(prod("c4"))},
			suspended: "paused by the annotation"},
		{name: "not paused by a false value", in: decision.Input{Cluster: withPaused(prod("c5"), "false"), Ranked: decision.Ranked([]*cel.Policy{all, high})}},
		{name: "not paused by 0", in: decision.Input{Cluster: withPaused(prod("c5"), "0"), Ranked: decision.Ranked([]*cel.Policy{all, high})}},
		{name: "paused by True", in: decision.Input{Cluster: withPaused(prod("c5"), "True"), Ranked: decision.Ranked([]*cel.Policy{all, high})},
			suspended: `paused by the annotation cleanup.fleetops.dev/paused: "True"`},
		{name: "paused by a value it cannot read", in: decision.Input{Cluster: withPaused(prod("c5"), "yes"), Ranked: decision.Ranked([]*cel.Policy{all, high})},
			suspended: `"yes"`},
		{name: "paused by an empty value", in: decision.Input{Cluster: withPaused(prod("c5"), ""), Ranked: decision.Ranked([]*cel.Policy{all, high})},
			suspended: `paused by the annotation`},
		{name: "a suspended policy keeps the cluster its annotation names from another selector",
			in:        decision.Input{Cluster: pinnedTo(prod("c6"), "all", false), Ranked: decision.Ranked([]*cel.Policy{suspended(all), high})},
			suspended: "suspended by CleanupPolicy all (spec.suspend), which the cluster names"},
		{name: "a deleting cluster pinned to a suspended policy",
			in:        decision.Input{Cluster: pinnedTo(prod("c7"), "all", true), Ranked: decision.Ranked([]*cel.Policy{high}), Pinned: suspended(all)},
			suspended: "suspended by CleanupPolicy all (spec.suspend)"},
		{name: "the standalone rule under a suspended policy",
			in:        decision.Input{Standalone: true, Ranked: decision.Ranked([]*cel.Policy{suspended(all)})},
			suspended: "suspended by CleanupPolicy all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := decision.NewGovernance().Resolve(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), tc.in)
			if tc.suspended == "" && g.Suspended != "" || !strings.Contains(g.Suspended, tc.suspended) {
				t.Fatalf("Suspended = %q, want %q", g.Suspended, tc.suspended)
			}
		})
	}
}

func withPaused(c *unstructured.Unstructured, value string) *unstructured.Unstructured {
	c.SetAnnotations(map[string]string{v1alpha1.PausedAnnotation: value})
	return c
}

func TestHooks(t *testing.T) {
	g := NewWithT(t)
	c := cluster("c1", "1", nil)
	c.SetAnnotations(map[string]string{
		v1alpha1.PreCleanupHookPrefix + "z": "", v1alpha1.PreCleanupHookPrefix + "a": "x",
		"pre-cleanup.hook.other.dev/b": "", "x/" + v1alpha1.PreCleanupHookPrefix: "", v1alpha1.PausedAnnotation: "true",
	})
	g.Expect(decision.Hooks(c)).To(Equal([]string{v1alpha1.PreCleanupHookPrefix + "a", v1alpha1.PreCleanupHookPrefix + "z"}))
	g.Expect(decision.Hooks(cluster("c2", "1", nil))).To(BeEmpty())
}

// guardSnapshot is a deleted cluster with one work, an hour after its
// deletion, with the annotations and ContentDeleteSuccess given.
func guardSnapshot(annotations map[string]string, cond *metav1.Condition) *decision.Snapshot {
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mc := cluster("c1", "1", nil)
	mc.SetAnnotations(annotations)
	mc.SetDeletionTimestamp(&deleted)
	mc.SetFinalizers([]string{v1alpha1.ClusterCleanupFinalizer})
	conds := []any{map[string]any{"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "R", "message": "m",
		"lastTransitionTime": deleted.UTC().Format(time.RFC3339)}}
	if cond != nil {
		conds = append(conds, map[string]any{"type": cond.Type, "status": string(cond.Status), "reason": cond.Reason, "message": "m",
			"lastTransitionTime": cond.LastTransitionTime.UTC().Format(time.RFC3339)})
	}
	_ = unstructured.SetNestedSlice(mc.Object, conds, "status", "conditions")
	w := object(decision.ManifestWorks, "w1", "", false)
	w.Meta.Finalizers = []string{v1alpha1.WorkAgentFinalizer}
	return &decision.Snapshot{Cluster: mc, Now: deleted.Add(time.Hour),
		Objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: {w}}}
}

func TestPlanHooksAndSuspend(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 1},
		Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort,
			Timeout: &metav1.Duration{Duration: time.Minute}}}})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	governed := func(s *decision.Snapshot) *decision.Governed {
		return &decision.Governed{Cluster: s.Cluster, Policy: p, Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), s.Cluster.Object)}
	}
	hookA, hookB := v1alpha1.PreCleanupHookPrefix+"a", v1alpha1.PreCleanupHookPrefix+"b"

	t.Run("hooks hold before the first step, whatever the strategy and timeout", func(t *testing.T) {
		g := NewWithT(t)
		s := guardSnapshot(map[string]string{hookB: "", hookA: ""}, nil)
		plan := decision.PlanTeardown(governed(s), s)
		g.Expect(plan.Hooks).To(Equal([]string{hookA, hookB}))
		g.Expect(plan.Steps[0].Kind).To(Equal(decision.StepHooks))
		g.Expect(plan.Steps[0].State).To(Equal(decision.StateNext))
		for _, st := range plan.Steps[1:] {
			g.Expect(st.State).To(Equal(decision.StateLater), string(st.Kind))
		}
		g.Expect(plan.Now()).To(BeEmpty(), "nothing is written while hooks hold")
		r := plan.Next().Report
		g.Expect(r.Pending).To(BeTrue())
		g.Expect(r.Reason).To(Equal(v1alpha1.WaitingForHooksReason))
		g.Expect(r.Event).To(Equal(v1alpha1.WaitingForHooksReason))
		g.Expect(r.Message).To(And(ContainSubstring("2 pre-cleanup hook(s)"), ContainSubstring(hookA), ContainSubstring(hookB)))
		g.Expect(r.Requeue.Duration).To(BeZero(), "the hooks' removal, an event, resumes: no polling")
	})

	t.Run("the timeout counts from the end of the hold", func(t *testing.T) {
		g := NewWithT(t)
		// Held until now (an hour after the deletion, the timeout a
		// minute): the first step after the hold forces nothing.
		held := &metav1.Condition{Type: v1alpha1.ContentDeleteSuccessCondition, Status: metav1.ConditionUnknown, Reason: v1alpha1.WaitingForHooksReason,
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))}
		s := guardSnapshot(nil, held)
		plan := decision.PlanTeardown(governed(s), s)
		for _, st := range plan.Steps {
			for _, a := range st.Actions {
				g.Expect(a.Verb).NotTo(Equal(decision.VerbForce), "%s %s", st.Kind, a.Name)
			}
		}
		// The first step reported after the hold: the timeout counts
		// from it.
		released := &metav1.Condition{Type: v1alpha1.ContentDeleteSuccessCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.DeletingStageReason,
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 59, 30, 0, time.UTC))}
		s = guardSnapshot(nil, released)
		start, ok := decision.CleanupStart(s)
		g.Expect(ok).To(BeTrue())
		g.Expect(start).To(BeTemporally("==", released.LastTransitionTime.Time))
		plan = decision.PlanTeardown(governed(s), s)
		for _, st := range plan.Steps {
			for _, a := range st.Actions {
				g.Expect(a.Verb).NotTo(Equal(decision.VerbForce), "%s %s", st.Kind, a.Name)
			}
		}
		// Without a hold the timeout counts from the deletion, and
		// BestEffort forces an hour later.
		s = guardSnapshot(nil, nil)
		start, _ = decision.CleanupStart(s)
		g.Expect(start).To(BeTemporally("==", s.Cluster.GetDeletionTimestamp().Time))
		plan = decision.PlanTeardown(governed(s), s)
		forced := false
		for _, st := range plan.Steps {
			for _, a := range st.Actions {
				forced = forced || a.Verb == decision.VerbForce
			}
		}
		g.Expect(forced).To(BeTrue(), "BestEffort past its timeout forces")
	})

	t.Run("a suspended plan says what it would do and writes nothing", func(t *testing.T) {
		g := NewWithT(t)
		s := guardSnapshot(nil, nil)
		gov := governed(s)
		gov.Suspended = "suspended by CleanupPolicy p (spec.suspend)"
		plan := decision.PlanTeardown(gov, s)
		g.Expect(plan.Suspended).To(Equal(gov.Suspended))
		g.Expect(plan.Next()).NotTo(BeNil())
		g.Expect(plan.Now()).To(BeEmpty())
		gov.Suspended = ""
		g.Expect(decision.PlanTeardown(gov, s).Now()).NotTo(BeEmpty())
	})
}

// The time a cluster spends paused (or under a suspended policy) does not
// count toward its timeout: the first teardown reconcile after the resume
// (Memory.Resumed) writes the condition alone (Unknown, Resumed), and the
// timeout counts from that transition, as after pre-cleanup hooks.
func TestPlanResumeAfterPauseCountsTimeoutFromResume(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 1},
		Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort,
			Timeout: &metav1.Duration{Duration: time.Minute}}}})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	deleted := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plan := func(s *decision.Snapshot) *decision.Plan {
		g := &decision.Governed{Cluster: s.Cluster, Policy: p, Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), s.Cluster.Object)}
		return decision.PlanTeardown(g, s)
	}
	forces := func(pl *decision.Plan) bool {
		for _, a := range pl.Now() {
			if a.Verb == decision.VerbForce {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name string
		cond *metav1.Condition
	}{
		{"paused before its deletion, unpaused an hour later", nil},
		{"paused mid-teardown for an hour", &metav1.Condition{Type: v1alpha1.ContentDeleteSuccessCondition, Status: metav1.ConditionFalse,
			Reason: v1alpha1.OrphaningReason, LastTransitionTime: metav1.NewTime(deleted.Add(time.Second))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The first reconcile after the resume, an hour after the
			// deletion: the Resumed condition alone.
			s := guardSnapshot(nil, tc.cond)
			s.Memory.Resumed = true
			first := plan(s)
			next := first.Next()
			if next == nil || next.Kind != decision.StepResumed || len(first.Now()) != 0 ||
				next.Report == nil || !next.Report.Pending || next.Report.Reason != v1alpha1.ResumedReason || next.Report.Event != "" {
				t.Fatalf("the first reconcile after the resume: next step %+v, writes %v; want the Resumed condition alone", next, first.Now())
			}
			// The next reconcile reads the Resumed condition: the timeout
			// counts from now, nothing is forced.
			resumed := &metav1.Condition{Type: v1alpha1.ContentDeleteSuccessCondition, Status: metav1.ConditionUnknown,
				Reason: v1alpha1.ResumedReason, LastTransitionTime: metav1.NewTime(s.Now)}
			s2 := guardSnapshot(nil, resumed)
			s2.Now = s.Now.Add(time.Second)
			if pl := plan(s2); forces(pl) || len(pl.Now()) == 0 {
				t.Fatalf("the reconcile after the Resumed condition: writes %v; want the teardown to go on, unforced", pl.Now())
			}
			// Control: once the step after the resume is reported, the
			// timeout counts from it.
			stepped := &metav1.Condition{Type: v1alpha1.ContentDeleteSuccessCondition, Status: metav1.ConditionFalse,
				Reason: v1alpha1.OrphaningReason, LastTransitionTime: metav1.NewTime(s.Now)}
			s3 := guardSnapshot(nil, stepped)
			s3.Now = s.Now.Add(2 * time.Minute)
			if !forces(plan(s3)) {
				t.Fatalf("the timeout, counted from the step after the resume, passed: want a force, got %v", plan(s3).Now())
			}
		})
	}
}

// TestPlanNeverHoldsATeardownItsRecordSaysBegun: a teardown paused
// mid-way shows Resumed once it resumes; the budget, spent, would hold a
// teardown not begun, but its record says it began: it goes on.
func TestPlanNeverHoldsATeardownItsRecordSaysBegun(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	zero := intstr.FromInt32(0)
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 1},
		Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort,
			Timeout: &metav1.Duration{Duration: time.Minute}}, BlastRadius: &v1alpha1.BlastRadius{MaxTeardowns: &zero}}})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	s := guardSnapshot(nil, &metav1.Condition{Type: v1alpha1.ContentDeleteSuccessCondition, Status: metav1.ConditionUnknown,
		Reason: v1alpha1.ResumedReason, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC))})
	plan := func() *decision.Plan {
		g := &decision.Governed{Cluster: s.Cluster, Policy: p, Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), s.Cluster.Object)}
		return decision.PlanTeardown(g, s)
	}
	s.Fleet = &decision.Fleet{Governed: 1, Deleting: []*unstructured.Unstructured{s.Cluster}}
	if next := plan().Next(); next == nil || next.Kind != decision.StepBlastRadius {
		t.Fatalf("control: without a record, a budget of 0 holds it; next step %+v", next)
	}
	s.Fleet.Begun = []decision.Started{{Cluster: s.Cluster.GetName(), UID: s.Cluster.GetUID(), Start: s.Cluster.GetDeletionTimestamp().Time}}
	pl := plan()
	if next := pl.Next(); !pl.Begun || next == nil || next.Kind == decision.StepBlastRadius || len(pl.Now()) == 0 {
		t.Fatalf("a teardown its record says began: begun %v, next step %+v, writes %v; want it to go on", pl.Begun, next, pl.Now())
	}
}
