package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Tally collects, per CleanupPolicy, the objects whose decision the
// operator could not write: a conflict with another field manager, or a
// write war it gave up. The policy's status counts them; a change wakes the
// policy's reconciler.
type Tally struct {
	mu        sync.Mutex
	conflicts map[string]sets.Set[string]
	contested map[string]sets.Set[string]
	changed   chan event.TypedGenericEvent[client.Object]
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{
		conflicts: map[string]sets.Set[string]{},
		contested: map[string]sets.Set[string]{},
		changed:   make(chan event.TypedGenericEvent[client.Object], 1024),
	}
}

// tallyKey names an object in the tally.
func tallyKey(kind string, o client.Object) string {
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// record sets or clears the object's conflict and contested marks under
// the policy, and clears them under every other policy.
func (t *Tally) record(policy, key string, conflict, contested bool) {
	t.mu.Lock()
	changed := mark(t.conflicts, policy, key, conflict) || false
	changed = mark(t.contested, policy, key, contested) || changed
	t.mu.Unlock()
	if changed {
		t.touch(policy)
	}
}

// touch wakes the policy's reconciler: what it counts has changed.
func (t *Tally) touch(policy string) {
	if policy == "" {
		return
	}
	p := &v1alpha1.CleanupPolicy{}
	p.Name = policy
	select {
	case t.changed <- event.TypedGenericEvent[client.Object]{Object: p}:
	default: // reconciles are already due
	}
}

func mark(m map[string]sets.Set[string], policy, key string, on bool) bool {
	changed := false
	for p, s := range m {
		if p != policy && s.Has(key) {
			s.Delete(key)
			changed = true
		}
	}
	s := m[policy]
	if s == nil {
		s = sets.New[string]()
		m[policy] = s
	}
	if on != s.Has(key) {
		changed = true
		if on {
			s.Insert(key)
		} else {
			s.Delete(key)
		}
	}
	return changed
}

// counts returns the policy's conflicts and contested objects.
func (t *Tally) counts(policy string) (conflicts, contested int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conflicts[policy].Len(), t.contested[policy].Len()
}

// source wakes the policy reconciler when a policy's tally changes.
func (t *Tally) source() source.Source {
	return source.Channel(t.changed, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	}))
}
