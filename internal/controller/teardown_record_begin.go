package controller

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// beginRecordAfter are the reasons of ContentDeleteSuccess that a teardown
// reports after a delete, which its record precedes. Orphaning is not one:
// it may only wait for the agent to confirm works stamped while the
// cluster lived.
var beginRecordAfter = []string{v1alpha1.SignallingReason, v1alpha1.DeletingStageReason, v1alpha1.ResourcesRemainingReason}

// beginRecord notes what a new record's teardown did before it: a record
// begins with the first destructive write, so a namespace being deleted,
// or a condition only such a write is followed by, is a record lost (or a
// teardown begun by an operator that kept none): the record says it
// resumed. Else only the namespace's label may precede it (written, then a
// crash before the record): it returns true, and noteLabel lists it.
func beginRecord(rec *record.Record, mc *unstructured.Unstructured, s *decision.Snapshot) bool {
	ns := s.Namespace
	if ns == nil {
		return false
	}
	c := decision.ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition)
	if ns.DeletionTimestamp != nil || c != nil && c.Status == metav1.ConditionFalse && slices.Contains(beginRecordAfter, c.Reason) {
		rec.Resumed = true
		return false
	}
	return true
}

// noteLabel lists the cluster namespace's deleting label as done, with the
// note, when the namespace carries it, the record does not list it, and
// the operator wrote it: a label written by an earlier process just before
// it stopped (a label is not announced alone). The label is the operator's
// when its field manager owns it, read from the API server (the cache
// keeps no managedFields): one someone else wrote is not listed as the
// operator's, nor a namespace of another UID than the record names.
func (r *recorder) noteLabel(ctx context.Context, rec *record.Record, mc *unstructured.Unstructured, s *decision.Snapshot, note string) error {
	ns := s.Namespace
	if ns == nil || ns.Name != mc.GetName() || ns.Labels[v1alpha1.ClusterDeletingLabel] != "true" ||
		slices.ContainsFunc(rec.Entries, func(e record.Entry) bool {
			return e.Resource == decision.NamespacesResource && e.Name == ns.Name && (e.UID != ns.UID || e.Action == record.Labelled)
		}) {
		return nil
	}
	live := &corev1.Namespace{}
	switch err := r.reader.Get(ctx, client.ObjectKey{Name: ns.Name}, live); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case live.UID != ns.UID || !ownsDeletingLabel(live.ManagedFields):
		return nil
	}
	rec.Add(record.Entry{Step: string(decision.StepSignal), Action: record.Labelled, State: record.Done,
		Resource: decision.NamespacesResource, Name: ns.Name, UID: ns.UID, Note: note, Time: metav1.NewTime(s.Now)})
	return nil
}

// ownsDeletingLabel says whether the operator's field manager owns the
// namespace's deleting label.
func ownsDeletingLabel(fields []metav1.ManagedFieldsEntry) bool {
	return slices.ContainsFunc(fields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == v1alpha1.FieldManager && f.FieldsV1 != nil &&
			ownsField(f.FieldsV1.Raw, "metadata", "labels", v1alpha1.ClusterDeletingLabel)
	})
}
