package tally

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Tally collects, per CleanupPolicy, the objects whose decision needs a
// person: a conflict with another field manager, a write war the operator
// gave up, a Policy template that does not read its decision, a decision a
// dry run holds back. The policy's status counts them; a change wakes the
// policy's reconciler.
type Tally struct {
	mu    sync.Mutex
	marks map[tallyCategory]map[string]sets.Set[string]
	// due holds the policies to wake, each once however often it was
	// touched; wake says it is not empty.
	due  sets.Set[string]
	wake chan struct{}
}

type tallyCategory int

const (
	ConflictMark tallyCategory = iota
	ContestedMark
	WriteFailedMark
	UnreadMark
	DryRunMark
	NotOwnedMark
)

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{
		marks: map[tallyCategory]map[string]sets.Set[string]{},
		due:   sets.New[string](),
		wake:  make(chan struct{}, 1),
	}
}

// TallyKey names an object in the tally.
func TallyKey(kind string, o client.Object) string {
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// Record sets the object's conflict, contested and write-failed marks
// under the policy, and clears them under every other policy.
func (t *Tally) Record(policy, key string, conflict, contested, failed bool) {
	t.Set(ConflictMark, policy, key, conflict)
	t.Set(ContestedMark, policy, key, contested)
	t.Set(WriteFailedMark, policy, key, failed)
}

// Set sets or clears one mark of an object under the policy, and clears it
// under every other policy.
func (t *Tally) Set(c tallyCategory, policy, key string, on bool) {
	t.mu.Lock()
	m := t.marks[c]
	if m == nil {
		m = map[string]sets.Set[string]{}
		t.marks[c] = m
	}
	var touched []string
	for p, s := range m {
		if p != policy && s.Has(key) {
			s.Delete(key)
			touched = append(touched, p)
		}
	}
	s := m[policy]
	if s == nil {
		s = sets.New[string]()
		m[policy] = s
	}
	if on != s.Has(key) {
		touched = append(touched, policy)
		if on {
			s.Insert(key)
		} else {
			s.Delete(key)
		}
	}
	t.mu.Unlock()
	for _, p := range touched {
		t.Touch(p)
	}
}

// Retain clears the marks of a category whose key starts with prefix and is
// not in keep: what a reconcile that recomputes all of them no longer found.
func (t *Tally) Retain(c tallyCategory, prefix string, keep sets.Set[string]) {
	t.mu.Lock()
	var touched []string
	for p, s := range t.marks[c] {
		for key := range s {
			if strings.HasPrefix(key, prefix) && !keep.Has(key) {
				s.Delete(key)
				touched = append(touched, p)
			}
		}
	}
	t.mu.Unlock()
	for _, p := range touched {
		t.Touch(p)
	}
}

// Marked says whether the object carries a conflict, contested,
// write-failed or dry-run mark under any policy.
func (t *Tally) Marked(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range []tallyCategory{ConflictMark, ContestedMark, WriteFailedMark, DryRunMark} {
		for _, keys := range t.marks[c] {
			if keys.Has(key) {
				return true
			}
		}
	}
	return false
}

// Count returns how many objects carry a mark under the policy.
func (t *Tally) Count(c tallyCategory, policy string) int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int32(t.marks[c][policy].Len())
}

// Touch wakes the policy's reconciler: what it counts has changed. A
// policy touched again before its reconcile is queued is woken once; none
// is dropped however many are due.
func (t *Tally) Touch(policy string) {
	if policy == "" {
		return
	}
	t.mu.Lock()
	t.due.Insert(policy)
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default: // a wake is pending: it takes this policy too
	}
}

// takeDue returns the policies due and forgets them.
func (t *Tally) takeDue() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	due := t.due.UnsortedList()
	t.due.Clear()
	return due
}

// Source wakes the policy reconciler when a policy's tally changes.
func (t *Tally) Source() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.wake:
				}
				for _, p := range t.takeDue() {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: p}})
				}
			}
		}()
		return nil
	})
}

// The operator changes or deletes, by name, only objects it created: those
// carrying its managed-by label. A same-named object without it is left
// alone, the step that needs it holds, and both the policy and the cluster
// say why.

// ReportNotOwned records, under the policy, an object the operator leaves
// alone, and emits a warning on the given objects the first time.
func ReportNotOwned(t *Tally, r events.EventRecorder, policy, key, message string, on ...runtime.Object) {
	if t == nil || !t.flag(NotOwnedMark, policy, key) {
		return
	}
	for _, o := range on {
		r.Eventf(o, nil, corev1.EventTypeWarning, v1alpha1.NotOwnedReason, "Own", "%s", message)
	}
}

// ClearNotOwned drops an object's not-owned mark under every policy.
func ClearNotOwned(t *Tally, key string) {
	if t != nil {
		t.Set(NotOwnedMark, "", key, false)
	}
}

// ClearNotOwnedWorks drops the not-owned marks of a cluster's works.
func ClearNotOwnedWorks(t *Tally, cluster string) {
	if t != nil {
		t.Retain(NotOwnedMark, "ManifestWork "+cluster+"/", nil)
	}
}

// flag sets a mark under the policy and reports whether it was not set before.
func (t *Tally) flag(c tallyCategory, policy, key string) bool {
	t.mu.Lock()
	had := t.marks[c][policy].Has(key)
	t.mu.Unlock()
	t.Set(c, policy, key, true)
	return !had
}

// Examples returns up to n of the keys marked under the policy, sorted.
func (t *Tally) Examples(c tallyCategory, policy string, n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, t.marks[c][policy].Len())
	for k := range t.marks[c][policy] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[:min(len(keys), n)]
}

// PolicyRef is a CleanupPolicy to regard in an Event.
func PolicyRef(name string, uid types.UID) *v1alpha1.CleanupPolicy {
	return &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
}
