package decision_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Review of 86f82fd..ab7b628: a paused cluster (or one under a suspended
// policy) gets no write, not even its condition, so the time it spends
// paused counts toward its timeout, unlike a hold by pre-cleanup hooks. A
// cluster deleted while paused and unpaused after its timeout (or paused
// mid-teardown for longer than it) is, in the very first reconcile after
// the resume, deleted and forced at once: its works' delete and the
// removal of the work agent's finalizer are in the same Plan.Now(), and
// the agent never had a moment. docs/design.md: "a long hold never lets a
// deadline force anything"; docs/troubleshooting.md: resuming "goes on
// from where it was".
func TestReviewResumeAfterPauseForcesAtOnce(t *testing.T) {
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
	for _, tc := range []struct {
		name string
		cond *metav1.Condition
	}{
		// Paused before the deletion: no step was ever reported.
		{"paused before its deletion, unpaused an hour later", nil},
		// Paused one second into the teardown, before any work was
		// deleted (the orphaning step still waiting), for an hour.
		{"paused mid-teardown for an hour", &metav1.Condition{Type: v1alpha1.ContentDeleteSuccessCondition, Status: metav1.ConditionFalse,
			Reason: v1alpha1.OrphaningReason, LastTransitionTime: metav1.NewTime(deleted.Add(time.Second))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The snapshot of the first reconcile after the paused
			// annotation is removed: an hour after the deletion.
			s := guardSnapshot(nil, tc.cond)
			g := &decision.Governed{Cluster: s.Cluster, Policy: p, Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), s.Cluster.Object)}
			plan := decision.PlanTeardown(g, s)
			for _, a := range plan.Now() {
				if a.Verb == decision.VerbForce {
					t.Fatalf("the first reconcile after the resume forces %s/%s (%s): the time paused counted toward the timeout", a.Namespace, a.Name, a.For)
				}
			}
		})
	}
}
