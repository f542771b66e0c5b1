package tally

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

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
