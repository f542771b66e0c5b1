package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// The operator changes or deletes, by name, only objects it created: those
// carrying its managed-by label. A same-named object without it is left
// alone, the step that needs it holds, and both the policy and the cluster
// say why.

// managedByOperator says whether the object carries the operator's
// managed-by label.
func managedByOperator(o metav1.Object) bool {
	return o.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedBy
}

// ownsSignalWork says whether a ManifestWork named like a deletion-signal
// work is the operator's. Besides the managed-by label, a signal work that
// an earlier version created (before the label) is the operator's too: it
// carries the signal label and the spec-hash annotation, and the API server
// records the operator's field manager as the one that applied it. The
// cache keeps no managedFields, so that last proof is read from the API
// server, once: the next apply adds the label.
func (a *ManagedClusterAdapter) ownsSignalWork(ctx context.Context, w metav1.Object) (bool, error) {
	if managedByOperator(w) {
		return true, nil
	}
	if w.GetLabels()[v1alpha1.SignalWorkLabel] != "true" || w.GetAnnotations()[v1alpha1.SpecHashAnnotation] == "" || w.GetLabels()[v1alpha1.ManagedByLabel] != "" {
		return false, nil
	}
	full := &workv1.ManifestWork{}
	if err := a.apiReader.Get(ctx, client.ObjectKey{Namespace: w.GetNamespace(), Name: w.GetName()}, full); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if full.UID != w.GetUID() {
		return false, nil
	}
	return slices.ContainsFunc(full.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == v1alpha1.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply
	}), nil
}

// notOwnedMessage says why the operator leaves an object alone.
func notOwnedMessage(kind, namespace, name string, o metav1.Object) string {
	who := "no " + v1alpha1.ManagedByLabel + " label"
	if v, ok := o.GetLabels()[v1alpha1.ManagedByLabel]; ok {
		who = fmt.Sprintf("%s is %q", v1alpha1.ManagedByLabel, v)
	}
	return fmt.Sprintf("%s %s/%s was not created by the operator (%s): it is neither changed nor deleted", kind, namespace, name, who)
}

// reportNotOwned records, under the policy, an object the operator leaves
// alone, and emits a warning on the given objects the first time.
func reportNotOwned(t *Tally, r events.EventRecorder, policy, key, message string, on ...runtime.Object) {
	if t == nil || !t.flag(notOwnedMark, policy, key) {
		return
	}
	for _, o := range on {
		r.Eventf(o, nil, corev1.EventTypeWarning, "NotOwned", "Own", "%s", message)
	}
}

// clearNotOwned drops an object's not-owned mark under every policy.
func clearNotOwned(t *Tally, key string) {
	if t != nil {
		t.set(notOwnedMark, "", key, false)
	}
}

// clearNotOwnedWorks drops the not-owned marks of a cluster's works.
func clearNotOwnedWorks(t *Tally, cluster string) {
	if t != nil {
		t.retain(notOwnedMark, "ManifestWork "+cluster+"/", nil)
	}
}

// flag sets a mark under the policy and reports whether it was not set before.
func (t *Tally) flag(c tallyCategory, policy, key string) bool {
	t.mu.Lock()
	had := t.marks[c][policy].Has(key)
	t.mu.Unlock()
	t.set(c, policy, key, true)
	return !had
}

// examples returns up to n of the keys marked under the policy, sorted.
func (t *Tally) examples(c tallyCategory, policy string, n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, t.marks[c][policy].Len())
	for k := range t.marks[c][policy] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[:min(len(keys), n)]
}

// policyRef is a CleanupPolicy to regard in an Event.
func policyRef(name string, uid types.UID) *v1alpha1.CleanupPolicy {
	return &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
}

// notOwnedSignal returns the step that holds a teardown at the signal when
// the work named like the deletion-signal work is not the operator's: it is
// not deleted, and nothing after the signal happens, until it is renamed or
// the policy names another work. nil when there is nothing to hold for.
func (a *ManagedClusterAdapter) notOwnedSignal(ctx context.Context, c *cleanup, work *decision.Object) (*step, error) {
	if work == nil {
		clearNotOwnedWorks(a.Tally, c.mc.GetName())
		return nil, nil
	}
	key := "ManifestWork " + work.Meta.Namespace + "/" + work.Meta.Name
	owned, err := a.ownsSignalWork(ctx, work.Meta)
	if err != nil || owned {
		clearNotOwned(a.Tally, key)
		return nil, err
	}
	msg := "held at the signal: " + notOwnedMessage("ManifestWork", work.Meta.Namespace, work.Meta.Name, work.Meta) +
		"; rename it, or change spec.deletionSignal.workName of CleanupPolicy " + c.g.Policy.Name
	if !c.dryRun {
		reportNotOwned(a.Tally, a.Recorder, c.g.Policy.Name, key, msg, policyRef(c.g.Policy.Name, c.g.Policy.UID))
	}
	return &step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason, action: "Signal", message: msg}, nil
}
