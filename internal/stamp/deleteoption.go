package stamp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Result is what became of a stamp: the generation of the work that
// carries it (positive), or why none does.
type Result int64

const (
	Conflict Result = -1 // another field manager owns deleteOption
	stale    Result = -2 // the work was replaced, changed or deleted meanwhile
)

// Written says whether the stamp was written.
func (r Result) Written() bool { return r > 0 }

// DeleteOption gives a work the deleteOption want and returns the
// generation that carries it. The operator's own works (its signal works) get a merge
// patch: it owns their whole spec, and an apply of deleteOption alone would
// drop the fields it applied before, the manifests among them. Other works
// get a server-side apply of deleteOption and the annotation recording the
// decision, never forced unless another manager holds only the CRD's
// default propagationPolicy, which it never wrote (see takeDefault); why
// says who holds it otherwise. Both carry the UID: they never touch a work
// recreated under the same name.
func DeleteOption(ctx context.Context, c client.Client, reader client.Reader, m *metrics.Metrics, w *metav1.ObjectMeta, want decision.DeleteOption) (result Result, why string, err error) {
	if want.PropagationPolicy == "" {
		// An empty stamp would be a release of the operator's deleteOption.
		return stale, "", fmt.Errorf("no deleteOption to set on ManifestWork %s/%s", w.Namespace, w.Name)
	}
	generation := int64(0)
	// The operator's own work (its managed-by label, which only the
	// operator may write): its whole spec is the operator's, so only
	// deleteOption is patched.
	if decision.ManagedByOperator(w) {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(snapshot.ManifestWorkGVK)
		obj.SetNamespace(w.Namespace)
		obj.SetName(w.Name)
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": w.UID},
			"spec":     map[string]any{"deleteOption": deleteOptionSpec(want)},
		})
		err = c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		generation = obj.GetGeneration()
	} else {
		var applied *unstructured.Unstructured
		applied, why, err = write(ctx, c, reader, &metav1.PartialObjectMetadata{ObjectMeta: *w}, deleteOptionStamp(want))
		generation = applied.GetGeneration()
	}
	switch {
	case apierrors.IsConflict(err) && fieldManagerConflict(err):
		return Conflict, cmp.Or(why, "another manager owns it"), nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return stale, "", nil // a UID precondition that failed: the watch brings the new work
	case err != nil:
		return stale, "", err
	}
	if want.PropagationPolicy == string(workv1.DeletePropagationPolicyTypeOrphan) {
		m.OrphanedWorks.Inc()
	}
	return Result(max(generation, 1)), "", nil
}

// fieldManagerConflict says whether a server-side apply was refused
// because another manager owns a field it sets.
func fieldManagerConflict(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}
