package main

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestPrintGuardRails: the printed plan names every hook that holds the
// teardown and says when the operator writes nothing (suspended), and the
// status table shows both.
func TestPrintGuardRails(t *testing.T) {
	hooks := []string{v1alpha1.PreCleanupHookPrefix + "backup", v1alpha1.PreCleanupHookPrefix + "dns"}
	plan := &decision.Plan{Cluster: "edge-7", Policy: "production", PolicyGeneration: 2, Deleting: true, Strategy: v1alpha1.RemoveStrategyBestEffort,
		Timeout: "30m0s", Available: true, Hooks: hooks, Suspended: "suspended by CleanupPolicy production (spec.suspend)",
		Steps: []decision.Step{
			{Kind: decision.StepHooks, State: decision.StateNext, Actions: []decision.Action{
				{Verb: decision.VerbHold, Name: "edge-7", For: "the pre-cleanup hook " + hooks[0] + " to be removed"},
				{Verb: decision.VerbHold, Name: "edge-7", For: "the pre-cleanup hook " + hooks[1] + " to be removed"}}},
			{Kind: decision.StepFinish, State: decision.StateLater},
		}}
	var b bytes.Buffer
	printPlan(&b, plan)
	out := b.String()
	for _, want := range []string{
		"Suspended: suspended by CleanupPolicy production (spec.suspend); the operator writes nothing",
		" 1. hold: wait until every pre-cleanup hook is removed",
		"hook: " + hooks[0], "hook: " + hooks[1],
		" 2. remove the finalizer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan does not say %q:\n%s", want, out)
		}
	}

	b.Reset()
	printStatus(&b, []clusterStatus{
		{Cluster: "edge-7", Policy: "production", Step: "Suspended", Message: plan.Suspended, Since: metav1.Now()},
		{Cluster: "edge-8", Policy: "production", Step: v1alpha1.WaitingForHooksReason, Hooks: hooks, Since: metav1.Now()},
	})
	lines := strings.Split(b.String(), "\n")
	for i, want := range [][]string{{"edge-7", "production", "Suspended", "nothing", "suspended"}, {"edge-8", "production", "WaitingForHooks", "hooks", "2,"}} {
		got := strings.Fields(lines[i+1])
		for _, w := range want {
			if !strings.Contains(strings.Join(got, " "), w) {
				t.Errorf("status line %q does not say %q", lines[i+1], w)
			}
		}
	}
}
