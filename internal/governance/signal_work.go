package governance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/stamp"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
)

// applySignalWork creates or updates the deletion-signal work, and writes
// nothing when the one in place carries the same spec. A work of that name
// that the operator did not create is left alone and reported: the cluster
// gets no signal until it is renamed or the policy names another work.
func (a *ManagedClusterAdapter) applySignalWork(ctx context.Context, mc *unstructured.Unstructured, name string, p *cel.Policy) error {
	namespace := mc.GetName()
	ns := &corev1.Namespace{}
	if err := a.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		// No namespace yet: the namespace watch brings the cluster back.
		return client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp != nil {
		return nil
	}
	if errs := a.SignalLimits.OrDefault().Check(p.Spec.DeletionSignal.Manifests); len(errs) > 0 {
		// Admitted before the limits, or past removed admission objects:
		// the policy's Ready condition names the manifests.
		logf.FromContext(ctx).Info("deletion-signal work not applied: its manifests break the operator's limits",
			"cluster", namespace, "policy", p.Name, "errors", errs.ToAggregate().Error())
		return nil
	}
	manifests, hash, err := signalManifests(p)
	if err != nil {
		return err
	}
	apply, current, err := a.signalWorkNeedsApply(ctx, mc, name, hash, p)
	if err != nil || !apply {
		return err
	}
	work := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": snapshot.ManifestWorkGVK.GroupVersion().String(),
		"kind":       snapshot.ManifestWorkGVK.Kind,
		"metadata": map[string]any{
			"name":        name,
			"namespace":   namespace,
			"labels":      map[string]any{v1alpha1.SignalWorkLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy},
			"annotations": map[string]any{v1alpha1.SpecHashAnnotation: hash},
		},
		// Deleting the work deletes its manifests: that is the signal.
		"spec": map[string]any{"workload": map[string]any{"manifests": manifests},
			"deleteOption": map[string]any{"propagationPolicy": string(workv1.DeletePropagationPolicyTypeForeground)}},
	}}
	if current == nil {
		// Created, not applied: a work someone creates under that name
		// after the read is refused here (AlreadyExists), and the next
		// reconcile reports it as not the operator's.
		if err := a.Client.Create(ctx, work, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
			return fmt.Errorf("creating the deletion-signal work %s/%s: %w", namespace, name, err)
		}
	} else {
		// A teardown begun since the cluster was read may have stamped the
		// work (orphaning its objects under Needless): not undone.
		if deleting, err := a.DeletingNow(ctx, namespace); err != nil || deleting {
			return err
		}
		// The signal work is the operator's own: it owns every field. The
		// work as read is a precondition (its UID and resourceVersion), so
		// that a work changed after the read (a teardown's stamp), or
		// deleted and created again under that name, is never written.
		work.SetUID(current.UID)
		work.SetResourceVersion(current.ResourceVersion)
		if err := a.Client.Patch(ctx, work, client.Apply, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying the deletion-signal work %s/%s: %w", namespace, name, err)
		}
	}
	logf.FromContext(ctx).Info("deletion-signal work applied", "cluster", namespace, "work", name)
	return nil
}

// signalManifests decodes the policy's deletion-signal manifests, and
// hashes them: the hash tells a work that carries them already.
func signalManifests(p *cel.Policy) ([]any, string, error) {
	manifests := make([]any, 0, len(p.Spec.DeletionSignal.Manifests))
	for _, m := range p.Spec.DeletionSignal.Manifests {
		var obj map[string]any
		if err := json.Unmarshal(m.Raw, &obj); err != nil {
			return nil, "", fmt.Errorf("CleanupPolicy %s: deletion-signal manifest: %w", p.Name, err)
		}
		manifests = append(manifests, obj)
	}
	raw, err := json.Marshal(manifests)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw)
	return manifests, hex.EncodeToString(sum[:8]), nil
}

// signalWorkNeedsApply says whether the signal work must be written: it
// does not exist (current is nil), or it is the operator's (current) and
// carries other manifests, lost its signal label or orphans some of its
// objects. A work of that name
// that the operator did not create is left alone and reported; one being
// deleted is left to finish.
func (a *ManagedClusterAdapter) signalWorkNeedsApply(ctx context.Context, mc *unstructured.Unstructured, name, hash string, p *cel.Policy) (apply bool, current *workv1.ManifestWork, err error) {
	namespace := mc.GetName()
	current = &workv1.ManifestWork{}
	err = a.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, current)
	if apierrors.IsNotFound(err) {
		// The cache may not show yet the work the previous reconcile
		// applied (the cluster's own update brings it back first): ask the
		// API server before applying it again.
		err = a.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, current)
	}
	switch {
	case apierrors.IsNotFound(err):
		tally.ClearNotOwnedWorks(a.Tally, namespace)
		return true, nil, nil
	case err != nil:
		return false, nil, err
	}
	if !decision.ManagedByOperator(current) {
		msg := decision.NotOwnedMessage("ManifestWork", namespace, name, current) + fmt.Sprintf(
			"; CleanupPolicy %s sends no deletion signal to cluster %s until it is renamed or spec.deletionSignal.workName names another work",
			p.Name, namespace)
		tally.ReportNotOwned(a.Tally, a.Recorder, p.Name, "ManifestWork "+namespace+"/"+name, msg, mc, tally.PolicyRef(p.Name, p.UID))
		logf.FromContext(ctx).Info("deletion-signal work not owned, left alone", "cluster", namespace, "work", name)
		return false, nil, nil
	}
	tally.ClearNotOwnedWorks(a.Tally, namespace)
	if current.GetDeletionTimestamp() != nil {
		return false, nil, nil // the watch brings the cluster back once it is gone
	}
	// Applied again when its manifests, its signal label or its
	// deleteOption were changed: a signal work that orphans its manifests
	// sends no signal (a retirement cut short by a change of the policy
	// back to this work leaves one).
	changed := current.GetAnnotations()[v1alpha1.SpecHashAnnotation] != hash || !decision.IsSignalWork(current) ||
		decision.CurrentDeleteOption(current).PropagationPolicy != ""
	return changed, current, nil
}

// RetireSignalWorks removes the operator's signal works other than keep,
// orphaning their manifests first: a work retired because the policy
// changed must not signal a deletion to the managed cluster. A work is
// deleted only once the work agent has applied its Orphan (its next event
// brings the cluster back); until then the agent would delete its objects.
func (a *ManagedClusterAdapter) RetireSignalWorks(ctx context.Context, namespace, keep string) error {
	var works workv1.ManifestWorkList
	if err := a.Client.List(ctx, &works, client.InNamespace(namespace), client.MatchingLabels{v1alpha1.SignalWorkLabel: "true"}); err != nil {
		return fmt.Errorf("listing the signal works of %s: %w", namespace, err)
	}
	checked := false
	for i := range works.Items {
		w := &works.Items[i]
		if w.Name == keep || w.DeletionTimestamp != nil {
			continue
		}
		if !decision.ManagedByOperator(w) {
			continue // someone else's work that carries the label: not ours to retire
		}
		if !checked {
			// A teardown begun since the cluster was read signals the
			// deletion with this work: not retired.
			if deleting, err := a.DeletingNow(ctx, namespace); err != nil || deleting {
				return err
			}
			checked = true
		}
		if !isOrphan(w) {
			result, _, err := stamp.DeleteOption(ctx, a.Client, a.APIReader, a.Metrics, &w.ObjectMeta, decision.DeleteOption{PropagationPolicy: string(workv1.DeletePropagationPolicyTypeOrphan)})
			if err != nil {
				return err
			}
			if result.Written() {
				a.Teardowns.RetireStamp(namespace, w.UID, int64(result))
			}
			continue
		}
		if !decision.OrphanApplied(w, a.Teardowns.RetireStamped(namespace, w.UID)) {
			continue // the agent's next status brings the cluster back
		}
		if err := a.Client.Delete(ctx, w, client.Preconditions{UID: &w.UID, ResourceVersion: &w.ResourceVersion}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return err
		}
		a.Teardowns.Retired(namespace, w.UID)
		logf.FromContext(ctx).Info("deletion-signal work retired", "cluster", namespace, "work", w.Name)
	}
	return nil
}

// isOrphan says whether the work leaves all its resources on the managed cluster when deleted.
func isOrphan(w *workv1.ManifestWork) bool {
	return w.Spec.DeleteOption != nil && w.Spec.DeleteOption.PropagationPolicy == workv1.DeletePropagationPolicyTypeOrphan
}
