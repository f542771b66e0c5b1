package teardown

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestTeardownStateEnds: every way a teardown ends leaves nothing of the
// cluster once it is gone; a finished teardown is remembered until then,
// and a cluster recreated under the same name starts with a state of its
// own.
func TestTeardownStateEnds(t *testing.T) {
	r := NewTeardowns(metrics.NewMetrics())
	st := r.of("c1", "u1")
	st.stamp("w1", 3)
	st.deletedAll(sets.New[types.UID]("w2"))
	st.forcedAll(sets.New[types.UID]("w3"))
	st.sawSuspended()
	r.RetireStamp("c1", "w4", 2)
	m := r.memory("c1", "u1")
	if m.Stamped["w1"] != 3 || !m.Deleted["w2"] || !m.Forced["w3"] || !m.Resumed || m.Stamped["w4"] != 2 {
		t.Fatalf("memory does not show the writes made: %+v", m)
	}

	r.end("u1", true)
	if !r.isFinished("u1") || r.peek("u1") != nil {
		t.Fatal("a teardown the operator finished keeps its state, or is not remembered as finished")
	}
	if got := r.of("c1", "u2").memory(); len(got.Stamped)+len(got.Deleted)+len(got.Forced) != 0 || got.Resumed {
		t.Fatalf("a cluster recreated under the same name inherits the old one's memory: %+v", got)
	}
	r.end("u2", false)
	r.gone("c1")
	if r.held() != 0 || r.keeps("c1") {
		t.Fatalf("a cluster gone is still kept: %d", r.held())
	}

	r.of("c2", "u3").stamp("w5", 1)
	r.end("u3", false)
	if r.held() != 0 {
		t.Fatal("a finalizer removed by hand leaves the teardown's state")
	}
}

// TestFinishedBounded: the finished clusters remembered are bounded, should
// their deletes be missed.
func TestFinishedBounded(t *testing.T) {
	r := NewTeardowns(nil)
	for i := range maxFinished + 1 {
		uid := types.UID(strconv.Itoa(i))
		r.of("c"+strconv.Itoa(i), uid)
		r.end(uid, true)
	}
	if r.held() > maxFinished {
		t.Fatalf("%d finished clusters remembered, more than %d", r.held(), maxFinished)
	}
}

// TestTeardownStateOfAClusterRecreated: a cluster deleted and recreated
// under its name before its delete was seen (the queue merges the events
// of a name) reaches the teardown as the new cluster, not being deleted:
// what was kept of the old one's teardown goes.
func TestTeardownStateOfAClusterRecreated(t *testing.T) {
	m := metrics.NewMetrics()
	a := &ClusterTeardown{ClusterWriter: ClusterWriter{Metrics: m}, Teardowns: NewTeardowns(m)}
	old := &unstructured.Unstructured{Object: map[string]any{}}
	old.SetName("c1")
	st := a.Teardowns.of("c1", "old")
	st.stamp("w1", 1)
	st.reported(old, nil, &decision.Report{Reason: "ResourcesRemaining"})
	a.Teardowns.of("c2", "other").stamp("w2", 1)
	if got := a.Kept("c1"); len(got) != 1 {
		t.Fatalf("the old teardown is not kept to begin with: %v", got)
	}

	recreated := &unstructured.Unstructured{Object: map[string]any{}}
	recreated.SetName("c1")
	recreated.SetUID("new")
	if _, err := a.reconcileCluster(context.Background(), recreated, nil); err != nil {
		t.Fatal(err)
	}
	if got := a.Kept("c1"); len(got) != 0 {
		t.Fatalf("the old teardown of a recreated cluster is still kept: %v", got)
	}
	if a.Teardowns.peek("other") == nil {
		t.Fatal("the teardown of another cluster was dropped")
	}
}

// TestStateOfAName: a name has one state, the latest cluster's; the
// events of its namespace reach that one, and none once it ended.
func TestStateOfAName(t *testing.T) {
	td := NewTeardowns(metrics.NewMetrics())
	old := td.of("c1", "old")
	if td.stateIn("c1") != old || !td.keeps("c1") {
		t.Fatal("the namespace's events do not reach the cluster's state")
	}
	other := td.of("c2", "other")
	recreated := td.of("c1", "new")
	if td.peek("old") != nil || td.stateIn("c1") != recreated {
		t.Fatal("the state of a cluster recreated under its name is not the new cluster's alone")
	}
	td.end("old", false) // the old cluster's late event ends nothing of the new one
	if td.stateIn("c1") != recreated {
		t.Fatal("ending the old cluster's teardown dropped the new one's")
	}
	td.end("new", false)
	if td.stateIn("c1") != nil || td.keeps("c1") {
		t.Fatal("a name keeps a state after its teardown ended")
	}
	if td.stateIn("c2") != other {
		t.Fatal("another cluster's state was dropped")
	}
}

// TestNotBegunWakes: the teardowns a policy's events wake are those of the
// policy not begun, and those not reported yet; a begun or ended one is
// not kept.
func TestNotBegunWakes(t *testing.T) {
	td := NewTeardowns(nil)
	names := func(policy, except string) []string {
		var out []string
		for _, r := range td.notBegunOf(policy, except) {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	mc := &unstructured.Unstructured{Object: map[string]any{}}
	report := func(cluster, uid, policy string, begun bool) {
		r := &decision.Report{Reason: v1alpha1.BlastRadiusExceededReason, Pending: true}
		if begun {
			r.Reason = v1alpha1.DeletingStageReason
		}
		td.reported(td.of(cluster, types.UID(uid)), mc, &decision.Plan{Policy: policy}, r)
	}
	report("held", "u1", "p", false)
	td.of("fresh", "u2")
	report("begun", "u3", "p", true)
	report("other", "u4", "q", false)
	if got := names("p", ""); !slices.Equal(got, []string{"fresh", "held"}) {
		t.Errorf("woken for p: %v, want [fresh held]", got)
	}
	if got := names("p", "held"); !slices.Equal(got, []string{"fresh"}) {
		t.Errorf("woken for p by held itself: %v, want [fresh]", got)
	}
	// A begun teardown reported again (its state lives on) stays out.
	report("begun", "u3", "p", true)
	td.end("u1", true)
	td.gone("fresh")
	if got := names("p", ""); len(got) != 0 {
		t.Errorf("woken for p after its teardowns ended: %v, want none", got)
	}
	if got := names("q", ""); !slices.Equal(got, []string{"other"}) {
		t.Errorf("woken for q: %v, want [other]", got)
	}
}

// TestEndedStateExportsNothing: an event handler that took a teardown's
// state before the teardown ended (its finalizer removed by hand while
// works go) exports nothing through it after: no series outlives the
// cluster. The teardowns waiting outside their namespace are found until
// they end.
func TestEndedStateExportsNothing(t *testing.T) {
	m := metrics.NewMetrics()
	td := NewTeardowns(m)
	mc := &unstructured.Unstructured{Object: map[string]any{}}
	mc.SetName("c1")
	st := td.of("c1", "u1")
	td.reported(st, mc, &decision.Plan{Policy: "p"}, &decision.Report{Reason: v1alpha1.DeletingStageReason, WaitsOutside: []string{"ops"}})
	st.observeRemaining("stage/works", 2)
	if got := td.waitingIn("ops"); len(got) != 1 || got[0].Name != "c1" {
		t.Fatalf("the teardown waiting in ops is not found: %v", got)
	}

	td.end("u1", false)
	st.observeRemaining("stage/works", 1)
	td.reported(st, mc, &decision.Plan{Policy: "p"}, &decision.Report{Reason: v1alpha1.DeletingStageReason, WaitsOutside: []string{"ops"}})
	td.gone("c1")
	if m.Exports("c1") || td.keeps("c1") {
		t.Fatal("a state taken before its teardown ended exported a series after it")
	}
	if got := td.waitingIn("ops"); len(got) != 0 {
		t.Fatalf("an ended teardown is still found waiting: %v", got)
	}
	if got := testutil.ToFloat64(m.InCleanup.WithLabelValues(v1alpha1.DeletingStageReason)); got != 0 {
		t.Fatalf("clusters in cleanup: %v, want 0", got)
	}
}
