package governance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// reconcileProtection keeps, on a cluster that is not being deleted, the
// deletion-protection mark and the acceptance of its deletion confirmation
// as decision.DecideProtection decides them. It makes at most one write,
// and says so: that write's event brings the cluster back for the rest.
// The result asks to come back when an accepted confirmation expires.
func (a *ManagedClusterAdapter) reconcileProtection(ctx context.Context, mc *unstructured.Unstructured, g *decision.Governed) (reconcile.Result, bool, error) {
	log := logf.FromContext(ctx)
	now := time.Now()
	p := decision.DecideProtection(g, now, a.ConfirmationMaxAge)
	name := mc.GetName()
	if p.Error != "" {
		log.Info("deletion protection failed: the cluster is protected", "cluster", name, "error", p.Error)
		a.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, v1alpha1.ProtectionFailedReason, "Protect",
			"%s; the cluster is protected from deletion until the expression succeeds for it", p.Error)
	}
	if p.Refused != "" && p.Protected {
		log.Info("deletion confirmation refused", "cluster", name, "reason", p.Refused)
		a.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, v1alpha1.ConfirmationRefusedReason, "Confirm",
			"the deletion confirmation does not count: %s; confirm again with kubectl cleanup confirm-delete %s", p.Refused, name)
	}
	var res reconcile.Result
	if p.Expires != nil {
		res.RequeueAfter = max(p.Expires.Sub(now), time.Second)
	}
	if p.Stamp != "" {
		return res, true, a.stampConfirmation(ctx, mc, p.Stamp)
	}

	m := protectionMarksOf(mc)
	add := (p.Protected && m.label != "true") || (p.Accepted != "" && m.accepted != p.Accepted)
	remove := (!p.Protected && m.hasLabel) || (p.Accepted == "" && m.hasAccepted)
	switch {
	case add:
		if err := a.applyProtection(ctx, mc, p); err != nil {
			return res, false, err
		}
	case remove:
		if err := a.removeProtection(ctx, mc, !p.Protected && m.hasLabel, p.Accepted == "" && m.hasAccepted); err != nil {
			return res, false, err
		}
	default:
		return res, false, nil
	}
	a.announceProtection(ctx, mc, p, m)
	return res, true, nil
}

// protectionMarks are the deletion-protection label and the accepted
// confirmation a cluster carried when it was read.
type protectionMarks struct {
	label, accepted       string
	hasLabel, hasAccepted bool
}

// protectionMarksOf reads the marks; the decision compares them with what
// it wants to know whether to write.
func protectionMarksOf(mc *unstructured.Unstructured) protectionMarks {
	var m protectionMarks
	m.label, m.hasLabel = mc.GetLabels()[v1alpha1.DeletionProtectedLabel]
	m.accepted, m.hasAccepted = mc.GetAnnotations()[v1alpha1.DeleteConfirmationAcceptedAnnotation]
	return m
}

// announceProtection tells, in one Event and the log, what a write of the
// protection changed from the marks as read. A write can change the mark
// and the acceptance at once; the mark, which decides whether the cluster
// can be deleted at all, is the one told.
func (a *ManagedClusterAdapter) announceProtection(ctx context.Context, mc *unstructured.Unstructured, p decision.Protection, m protectionMarks) {
	log := logf.FromContext(ctx)
	name := mc.GetName()
	switch {
	case p.Protected && m.label != "true":
		a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.ProtectedReason, "Protect",
			"protected from deletion (%s=true): deleting it needs kubectl cleanup confirm-delete %s first", v1alpha1.DeletionProtectedLabel, name)
		log.Info("cluster protected from deletion", "cluster", name)
	case !p.Protected && m.hasLabel:
		a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.ProtectedReason, "Protect",
			"no longer protected from deletion: %s removed", v1alpha1.DeletionProtectedLabel)
		log.Info("cluster no longer protected from deletion", "cluster", name)
	case p.Accepted != "" && m.accepted != p.Accepted:
		a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.DeleteConfirmedReason, "Confirm",
			"deletion confirmed at %s: the cluster may be deleted until %s", p.Accepted, p.Expires.UTC().Format(time.RFC3339))
		log.Info("deletion confirmation accepted", "cluster", name, "confirmedAt", p.Accepted, "expires", p.Expires)
	case p.Accepted == "" && m.hasAccepted:
		a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.DeleteConfirmedReason, "Confirm",
			"the deletion confirmation of %s no longer counts: the cluster is protected from deletion again", m.accepted)
		log.Info("deletion confirmation taken back", "cluster", name, "confirmedAt", m.accepted)
	}
}

// stampConfirmation writes when the operator saw a confirmation that came
// without a time (a person's own kubectl annotate): the cluster's event
// brings it back, and the stamped confirmation is accepted as any other.
func (a *ManagedClusterAdapter) stampConfirmation(ctx context.Context, mc *unstructured.Unstructured, at string) error {
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": mc.GetResourceVersion(),
		"annotations": map[string]any{v1alpha1.DeleteConfirmedAtAnnotation: at}}})
	if err != nil {
		return err
	}
	if err := a.Client.Patch(ctx, mc.DeepCopy(), client.RawPatch(types.MergePatchType, raw)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("stamping the deletion confirmation of ManagedCluster %s: %w", mc.GetName(), err))
	}
	logf.FromContext(ctx).Info("deletion confirmation seen", "cluster", mc.GetName(), "stamped", at)
	a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.DeleteConfirmedReason, "Confirm",
		"deletion confirmation %s=%s seen at %s: stamped %s", v1alpha1.DeleteConfirmedAnnotation, mc.GetName(), at, v1alpha1.DeleteConfirmedAtAnnotation)
	return nil
}

// applyProtection applies, with server-side apply, the mark and the
// acceptance the decision wants; what the operator applied before and no
// longer does is removed by the same apply. The cluster's resourceVersion
// makes it fail if the cluster changed since it was decided.
func (a *ManagedClusterAdapter) applyProtection(ctx context.Context, mc *unstructured.Unstructured, p decision.Protection) error {
	md := map[string]any{"name": mc.GetName(), "resourceVersion": mc.GetResourceVersion()}
	if p.Protected {
		md["labels"] = map[string]any{v1alpha1.DeletionProtectedLabel: "true"}
	}
	if p.Accepted != "" {
		md["annotations"] = map[string]any{v1alpha1.DeleteConfirmationAcceptedAnnotation: p.Accepted}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": mc.GetAPIVersion(), "kind": mc.GetKind(), "metadata": md,
	}}
	// The mark is the operator's: it takes the field from whoever else set it.
	if err := a.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("applying the deletion protection of ManagedCluster %s: %w", mc.GetName(), err))
	}
	return nil
}

// removeProtection removes the mark, the acceptance, or both, whoever set
// them, if the cluster did not change since it was decided.
func (a *ManagedClusterAdapter) removeProtection(ctx context.Context, mc *unstructured.Unstructured, label, annotation bool) error {
	md := map[string]any{"resourceVersion": mc.GetResourceVersion()}
	if label {
		md["labels"] = map[string]any{v1alpha1.DeletionProtectedLabel: nil}
	}
	if annotation {
		md["annotations"] = map[string]any{v1alpha1.DeleteConfirmationAcceptedAnnotation: nil}
	}
	raw, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	if err := a.Client.Patch(ctx, mc.DeepCopy(), client.RawPatch(types.MergePatchType, raw)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing the deletion protection of ManagedCluster %s: %w", mc.GetName(), err))
	}
	return nil
}
