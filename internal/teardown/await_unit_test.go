package teardown

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// waitPlan is a plan whose next step is a stage waiting for the works
// named, deleting unless alive, in group 0; then one more in group 1.
func waitPlan(deleting []types.UID, alive ...types.UID) *decision.Plan {
	now := metav1.Now()
	act := func(uid types.UID, ts *metav1.Time, group int) decision.Action {
		meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: uid, DeletionTimestamp: ts}}
		return decision.Action{Verb: decision.VerbWait, Resource: decision.ResourceName(decision.ManifestWorks),
			Namespace: "c1", UID: uid, Meta: meta, Group: group}
	}
	step := decision.Step{Kind: decision.StepStage, Name: "manifestworks", State: decision.StateNext}
	for _, uid := range deleting {
		step.Actions = append(step.Actions, act(uid, &now, 0))
	}
	for _, uid := range alive {
		step.Actions = append(step.Actions, act(uid, nil, 0))
	}
	step.Actions = append(step.Actions, act("later", nil, 1))
	return &decision.Plan{Cluster: "c1", Steps: []decision.Step{step}}
}

func TestAwaitedWorks(t *testing.T) {
	st := &teardownState{}
	st.await(waitPlan([]types.UID{"a", "b", "c"}))
	// The metric counts the step's later group too.
	if quiet, step, n, _ := st.gone("a"); !quiet || step != "stage/manifestworks" || n != 3 {
		t.Fatalf("a gone with b and c awaited, and one work later: quiet %v, step %q, %d remain; want quiet, 3", quiet, step, n)
	}
	if quiet, _, _, _ := st.gone("unrelated"); quiet {
		t.Fatal("a work not awaited is queued")
	}

	// A plan read before b's removal, remembered after it: b's event is
	// past, so it is not awaited again.
	st.gone("b")
	st.await(waitPlan([]types.UID{"b", "c"}))
	if quiet, _, n, _ := st.gone("c"); quiet || n != 1 {
		t.Fatalf("c, the last awaited work, gone: quiet %v, %d remain; want queued, 1", quiet, n)
	}

	// All of a plan's works seen gone already: nothing is awaited.
	st.await(waitPlan([]types.UID{"b", "c"}))
	if st.awaited.uids.Len() != 0 {
		t.Fatalf("awaited %v, want nothing", st.awaited.uids)
	}

	// A step that waits for a work not being deleted, or writes, or a
	// dry run, awaits nothing.
	for name, p := range map[string]*decision.Plan{
		"a work not deleting": waitPlan([]types.UID{"d"}, "e"),
		"a dry run":           func() *decision.Plan { p := waitPlan([]types.UID{"d"}); p.DryRun = true; return p }(),
		"a held plan":         func() *decision.Plan { p := waitPlan([]types.UID{"d"}); p.Held = "held"; return p }(),
		"a delete to write": func() *decision.Plan {
			p := waitPlan([]types.UID{"d"})
			p.Steps[0].Actions[0].Verb = decision.VerbDelete
			return p
		}(),
		"no plan": nil,
	} {
		st.await(waitPlan([]types.UID{"x"}))
		st.await(p)
		if quiet, _, _, _ := st.gone("d"); quiet || st.awaited.uids.Has("x") {
			t.Errorf("%s: awaited %v, want nothing", name, st.awaited.uids)
		}
	}
}
