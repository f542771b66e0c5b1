package stamp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/internal/tally"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestOwnEvents: a stamped kind's delete event, and the update that marks
// an object deleting, cost no reconcile (it would do nothing but forget
// the object) and forget the object's marks in the counts (controller-runtime
// hands a missed delete's tombstone on as its object, so that is the same
// event); spec changes and creates reach the reconcile; the cluster adapter, told of gone
// clusters by a reconcile, keeps its delete events. A re-creation under the
// same name reaches the reconcile even when it comes as an update.
func TestOwnEvents(t *testing.T) {
	counts := tally.NewTally()
	work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "w", Generation: 1, UID: "one"}}
	cp := &unstructured.Unstructured{}
	cp.SetNamespace("c1")
	cp.SetName("p")
	cp.SetGeneration(1)
	cp.SetUID("one")
	for _, tc := range []struct {
		name, kind string
		own        predicate.Predicate
		obj        client.Object
	}{
		{"manifestwork", "ManifestWork", ownEvents[*workv1.ManifestWork](&ManifestWorkAdapter{stamper: stamper{Tally: counts}}), work},
		{"configurationpolicy", "ConfigurationPolicy", ownEvents[*unstructured.Unstructured](&ConfigurationPolicyAdapter{stamper: stamper{Tally: counts}}), cp},
	} {
		// Both filters the controller applies to its own kind.
		keep := predicate.And(stampEvents, tc.own)
		key := tally.TallyKey(tc.kind, tc.obj)
		counts.Set(tally.DryRunMark, "dry", key, true)
		counts.Record("p", key, true, false, false)
		if keep.Delete(event.DeleteEvent{Object: tc.obj}) {
			t.Errorf("%s: a delete event reaches the reconcile", tc.name)
		}
		if counts.Count(tally.DryRunMark, "dry") != 0 || counts.Count(tally.ConflictMark, "p") != 0 {
			t.Errorf("%s: the tally still counts a deleted object", tc.name)
		}
		// The mark of a deletion (the API server counts it as a
		// generation) forgets the object too, and costs no reconcile.
		counts.Set(tally.DryRunMark, "dry", key, true)
		marked := tc.obj.DeepCopyObject().(client.Object)
		now := metav1.Now()
		marked.SetDeletionTimestamp(&now)
		marked.SetGeneration(2)
		if keep.Update(event.UpdateEvent{ObjectOld: tc.obj, ObjectNew: marked}) {
			t.Errorf("%s: the mark of a deletion reaches the reconcile", tc.name)
		}
		if counts.Count(tally.DryRunMark, "dry") != 0 {
			t.Errorf("%s: the tally still counts an object being deleted", tc.name)
		}
		// A spec change and a create reach it.
		changed := tc.obj.DeepCopyObject().(client.Object)
		changed.SetGeneration(2)
		if !keep.Update(event.UpdateEvent{ObjectOld: tc.obj, ObjectNew: changed}) || !keep.Create(event.CreateEvent{Object: tc.obj}) {
			t.Errorf("%s: a spec change, or a create, does not reach the reconcile", tc.name)
		}
		// A deletion and re-creation the informer saw only as an update
		// (a gap in the watch): the same generation, labels and
		// annotations, another UID.
		// The old object is forgotten.
		again := tc.obj.DeepCopyObject().(client.Object)
		again.SetUID("another")
		counts.Record("p", key, true, false, false)
		if !keep.Update(event.UpdateEvent{ObjectOld: tc.obj, ObjectNew: again}) {
			t.Errorf("%s: a re-creation seen as an update does not reach the reconcile", tc.name)
		}
		if counts.Count(tally.ConflictMark, "p") != 0 {
			t.Errorf("%s: the tally still counts the object a re-creation replaced", tc.name)
		}
		if keep.Update(event.UpdateEvent{ObjectOld: tc.obj, ObjectNew: tc.obj.DeepCopyObject().(client.Object)}) {
			t.Errorf("%s: an update that changes nothing watched reaches the reconcile", tc.name)
		}
	}
}

// TestRecheck: a reconcile that marked an object that went away meanwhile
// (deleted, or marked deleting) forgets it again; a re-created object of the
// same name keeps its marks, only the old one's apply count goes; an object
// still there keeps both.
func TestRecheck(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := workv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	reconciled := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "w", UID: "one"}}
	now := metav1.Now()
	for _, tc := range []struct {
		name          string
		cached        *workv1.ManifestWork // nil: gone
		marks, counts bool                 // what is left
	}{
		{"gone", nil, false, false},
		{"being deleted", &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "w", UID: "one",
			DeletionTimestamp: &now, Finalizers: []string{"agent"}}}, false, false},
		{"re-created", &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "w", UID: "two"}}, true, false},
		{"still there", reconciled.DeepCopy(), true, true},
	} {
		b := fake.NewClientBuilder().WithScheme(scheme)
		if tc.cached != nil {
			b = b.WithObjects(tc.cached)
		}
		s := &stamper{Client: b.Build(), Tally: tally.NewTally(), Recorder: events.NewFakeRecorder(10)}
		key := tally.TallyKey("ManifestWork", reconciled)
		s.Tally.Record("p", key, true, false, false)
		s.guard.mayApply(reconciled, "Orphan", s.Recorder, "Orphaning", "spec.deleteOption")
		s.recheck(context.Background(), reconciled, "ManifestWork")
		if got := s.Tally.Marked(key); got != tc.marks {
			t.Errorf("%s: marked %v, want %v", tc.name, got, tc.marks)
		}
		if got := s.guard.has(reconciled.UID); got != tc.counts {
			t.Errorf("%s: apply counted %v, want %v", tc.name, got, tc.counts)
		}
	}
}

// The guard's Contested Event says why the decision did not hold: another
// manager's revert, or the writes' own failure (an admission refusal).
func TestGuardSaysWhy(t *testing.T) {
	work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "w", UID: "one"}}
	drain := func(r *events.FakeRecorder) []string {
		var got []string
		for {
			select {
			case e := <-r.Events:
				got = append(got, e)
			default:
				return got
			}
		}
	}
	apply := func(g *applyGuard, r *events.FakeRecorder, err error) bool {
		if !g.mayApply(work, "Orphan", r, "Orphaning", "spec.deleteOption") {
			return false
		}
		g.outcome(work, err, r, "Orphaning", "spec.deleteOption", "Orphan")
		return true
	}

	// Reverted: applied once, re-applied three times, then given up.
	var g applyGuard
	recorder := events.NewFakeRecorder(10)
	applies := 0
	for apply(&g, recorder, nil) {
		applies++
	}
	got := drain(recorder)
	if applies != maxReapplies+1 || len(got) != 1 || !strings.Contains(got[0], "Contested") ||
		!strings.Contains(got[0], "another manager reverted spec.deleteOption 3 times") {
		t.Errorf("reverted: %d applies, Events %q; want %d and one Contested", applies, got, maxReapplies+1)
	}

	// Refused: never given up, and said each time (the recorder folds
	// repeats into one Event's series).
	g = applyGuard{}
	refusal := apierrors.NewForbidden(schema.GroupResource{Group: "work.open-cluster-management.io", Resource: "manifestworks"}, "w",
		errors.New("denied by refuse-stamp"))
	for range 3 * maxReapplies {
		if !apply(&g, recorder, refusal) {
			t.Fatal("refused writes: the guard gave the decision up")
		}
	}
	got = drain(recorder)
	if len(got) != 3*maxReapplies || !strings.Contains(got[0], "Warning "+v1alpha1.WriteFailedReason) || !strings.Contains(got[0], "denied by refuse-stamp") {
		t.Errorf("refused writes: Events %q, want %d %s naming the refusal", got, 3*maxReapplies, v1alpha1.WriteFailedReason)
	}

	// A write that timed out may have landed: counted, and the Event that
	// gives it up says the last write failed.
	g, applies = applyGuard{}, 0
	for apply(&g, recorder, apierrors.NewTimeoutError("the server did not answer", 1)) {
		applies++
	}
	got = drain(recorder)
	if applies != maxReapplies+1 || len(got) != 1 || !strings.Contains(got[0], "Contested") || !strings.Contains(got[0], "the last write failing") {
		t.Errorf("timed-out writes: %d applies, Events %q; want %d and one Contested naming the failure", applies, got, maxReapplies+1)
	}
}

// TestWriteFailedNotRetried: an object counted as refused stops counting
// once no write of its decision follows (skipped, held, the decision
// failed, a dry run): the status never counts a write no one retries.
func TestWriteFailedNotRetried(t *testing.T) {
	work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "w", UID: "one"}}
	policy := &cel.Policy{Name: "p", Spec: &v1alpha1.CleanupPolicySpec{DryRun: true}}
	decide := func() (stampDecision, error) { return stampDecision{stamp: stamp{kind: "ManifestWork"}}, nil }
	for _, tc := range []struct {
		name   string
		g      *decision.Governed
		skip   bool
		decide func() (stampDecision, error)
	}{
		{"skipped", &decision.Governed{Policy: policy}, true, decide},
		{"held", &decision.Governed{Policy: policy, Held: errors.New("a policy failed")}, false, decide},
		{"the decision failed", &decision.Governed{Policy: policy}, false, func() (stampDecision, error) {
			return stampDecision{}, errors.New("no such key")
		}},
		{"a dry run", &decision.Governed{Policy: policy}, false, decide},
	} {
		s := &stamper{Client: fake.NewClientBuilder().Build(), Tally: tally.NewTally(), Recorder: events.NewFakeRecorder(10)}
		s.Tally.Record("p", tally.TallyKey("ManifestWork", work), false, false, true)
		if _, err := s.reconcileStamp(context.Background(), work, tc.g, tc.skip, "ManifestWork", "Orphaning", tc.decide); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := s.Tally.Count(tally.WriteFailedMark, "p"); got != 0 {
			t.Errorf("%s: writeFailed %d, want 0", tc.name, got)
		}
	}
}
