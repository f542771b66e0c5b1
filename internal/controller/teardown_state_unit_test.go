package controller

import (
	"context"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestTeardownStateEnds: every way a teardown ends leaves nothing of the
// cluster once it is gone; a finished teardown is remembered until then,
// and a cluster recreated under the same name starts with a state of its
// own.
func TestTeardownStateEnds(t *testing.T) {
	r := newTeardowns()
	st := r.of("c1", "u1")
	st.stamp("w1", 3)
	st.deletedAll(sets.New[types.UID]("w2"))
	st.forcedAll(sets.New[types.UID]("w3"))
	st.sawSuspended()
	r.retireStamp("c1", "w4", 2)
	m := r.memory("c1", "u1")
	if m.Stamped["w1"] != 3 || !m.Deleted["w2"] || !m.Forced["w3"] || !m.Resumed || m.Stamped["w4"] != 2 {
		t.Fatalf("memory does not show the writes made: %+v", m)
	}

	r.end("c1", "u1")
	if !r.isFinished("u1") || r.peek("u1") != nil {
		t.Fatal("a teardown the operator finished keeps its state, or is not remembered as finished")
	}
	if got := r.of("c1", "u2").memory(); len(got.Stamped)+len(got.Deleted)+len(got.Forced) != 0 || got.Resumed {
		t.Fatalf("a cluster recreated under the same name inherits the old one's memory: %+v", got)
	}
	r.drop("u2")
	r.gone("c1")
	if r.held() != 0 || r.keeps("c1") {
		t.Fatalf("a cluster gone is still kept: %d", r.held())
	}

	r.of("c2", "u3").stamp("w5", 1)
	r.drop("u3")
	if r.held() != 0 {
		t.Fatal("a finalizer removed by hand leaves the teardown's state")
	}
}

// TestFinishedBounded: the finished clusters remembered are bounded, should
// their deletes be missed.
func TestFinishedBounded(t *testing.T) {
	r := newTeardowns()
	for i := range maxFinished + 1 {
		r.end("c", types.UID(strconv.Itoa(i)))
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
	a := &ClusterTeardown{clusterWriter: clusterWriter{Metrics: NewMetrics()}, teardowns: newTeardowns()}
	a.teardowns.of("c1", "old").stamp("w1", 1)
	a.teardowns.end("c1", "older")
	a.teardowns.of("c2", "other").stamp("w2", 1)
	old := &unstructured.Unstructured{Object: map[string]any{}}
	old.SetName("c1")
	a.Metrics.observeStep(old, nil, "ResourcesRemaining")
	if got := a.Kept("c1"); len(got) != 1 {
		t.Fatalf("the old teardown is not kept to begin with: %v", got)
	}

	recreated := &unstructured.Unstructured{Object: map[string]any{}}
	recreated.SetName("c1")
	recreated.SetUID("new")
	if _, err := a.Reconcile(context.Background(), recreated, nil); err != nil {
		t.Fatal(err)
	}
	if got := a.Kept("c1"); len(got) != 0 {
		t.Fatalf("the old teardown of a recreated cluster is still kept: %v", got)
	}
	if a.teardowns.peek("other") == nil {
		t.Fatal("the teardown of another cluster was dropped")
	}
}
