package stamp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
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

// write applies st to obj, the one write of a stamp: a server-side apply
// under the operator's field manager, never forced, with obj's UID as a
// precondition, so that it never touches an object recreated under the
// same name. Refused because another manager holds a field it sets, it
// takes that field when its holders hold only a default nobody wrote
// (takeDefault) and applies again; otherwise why says, where it can, whose
// the value is, and err is the refusal. It returns the object as applied.
func write(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, st stamp) (applied *unstructured.Unstructured, why string, err error) {
	applied = stampPatch(obj, st)
	err = c.Patch(ctx, applied, client.Apply, client.FieldOwner(v1alpha1.FieldManager))
	if !apierrors.IsConflict(err) || !fieldManagerConflict(err) || st.value == "" {
		return applied, "", err
	}
	took, why, terr := takeDefault(ctx, c, reader, obj, st, err)
	switch {
	case terr != nil:
		return applied, "", terr
	case !took:
		return applied, why, err
	}
	applied = stampPatch(obj, st)
	return applied, "", c.Patch(ctx, applied, client.Apply, client.FieldOwner(v1alpha1.FieldManager))
}

// stampPatch is the apply of a stamp: the UID makes it a precondition, so
// it never creates an object that was deleted meanwhile.
func stampPatch(obj client.Object, st stamp) *unstructured.Unstructured {
	md := map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace(), "uid": string(obj.GetUID())}
	patch := map[string]any{"apiVersion": st.gvk.GroupVersion().String(), "kind": st.gvk.Kind, "metadata": md}
	if st.value != "" {
		md["annotations"] = map[string]any{st.annotation: st.value}
		patch["spec"] = st.spec()
	}
	return &unstructured.Unstructured{Object: patch}
}

// LastAppliedAnnotation is where a client-side apply (kubectl apply, Argo CD
// without server-side apply, kubectl create --save-config) records the
// configuration it sent.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// A schema default that nobody wrote is not anybody's decision. A request
// that creates or updates an object owns, in managedFields, every field the
// API server set on its behalf, the CRD's defaults included, when it is not
// a server-side apply. So a ConfigurationPolicy created with a client-side
// apply "owns" the pruneObjectBehavior: None its CRD filled in, and the
// operator's apply, which never forces, conflicts with a value nobody chose.
//
// defaultedField tells such a value from one someone wrote. It is asked
// only after an apply conflicted, so it may read the object from the API
// server (the cache drops managedFields). It answers with the managers that
// hold the field, and the resourceVersion it read, when each of them
// provably never sent it:
//
//   - the conflict is on the stamp's defaulted field and nothing else;
//   - each other manager that owns the field is an Update manager that also
//     wrote the object's last-applied configuration, and that configuration
//     does not hold the field.
//
// A server-side apply manager owns only what it sent, so one that owns the
// field wrote it. An Update manager without a last-applied configuration (a
// plain create, an edit, a patch) leaves no record of what it sent: its
// value stays its own.
func defaultedField(ctx context.Context, reader client.Reader, obj client.Object, st stamp, conflict error) (managers []string, resourceVersion, why string, err error) {
	if len(st.defaulted) == 0 {
		return nil, "", "", nil
	}
	if why, only := conflictOnlyOn(conflict, st.defaulted); !only {
		return nil, "", why, nil
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(st.gvk)
	if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return nil, "", "", client.IgnoreNotFound(err)
	}
	if live.GetUID() != obj.GetUID() {
		return nil, "", "the object was replaced", nil
	}
	managers, why = managersThatNeverSent(live, st.defaulted)
	if why != "" {
		return nil, "", why, nil
	}
	if len(managers) == 0 {
		return nil, "", "no other manager owns it now", nil
	}
	return managers, live.GetResourceVersion(), "", nil
}

// conflictOnlyOn says whether an apply's conflict is a field conflict on
// path and on nothing else: only then can taking the default resolve it.
// When the conflict names another field, why says which; any other error
// (a UID precondition, say) is no field conflict and has no why.
func conflictOnlyOn(conflict error, path []string) (why string, only bool) {
	// The API server names each conflicting field in a cause of its own.
	field := "." + strings.Join(path, ".")
	var status apierrors.APIStatus
	if !errors.As(conflict, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return "", false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict || c.Field != field {
			return fmt.Sprintf("the conflict is on %s", c.Field), false
		}
	}
	return "", true
}

// managersThatNeverSent lists the managers other than the operator that own
// the field at path on the live object, provided each provably never sent
// it: an Update manager that wrote the last-applied configuration, which
// does not hold the field. At the first manager that may have sent it, it
// stops and why names that manager and the reason.
func managersThatNeverSent(live *unstructured.Unstructured, path []string) (managers []string, why string) {
	lastApplied, hasLastApplied := live.GetAnnotations()[LastAppliedAnnotation]
	for _, e := range live.GetManagedFields() {
		if e.Manager == v1alpha1.FieldManager || e.FieldsV1 == nil || !decision.OwnsField(e.FieldsV1.Raw, path...) {
			continue
		}
		who := fmt.Sprintf("%q", e.Manager)
		switch {
		case e.Operation == metav1.ManagedFieldsOperationApply:
			return nil, who + " applied it with server-side apply"
		case !hasLastApplied || !decision.OwnsField(e.FieldsV1.Raw, "metadata", "annotations", LastAppliedAnnotation):
			return nil, who + " set it, and no record says what it sent"
		}
		sent, err := sentField(lastApplied, path)
		switch {
		case err != nil:
			return nil, fmt.Sprintf("%s set it, and its %s cannot be read: %v", who, LastAppliedAnnotation, err)
		case sent:
			return nil, fmt.Sprintf("%s applied it (it is in %s)", who, LastAppliedAnnotation)
		}
		managers = append(managers, e.Manager)
	}
	return managers, ""
}

// takeDefault, after an apply conflicted, takes the stamp's defaulted field
// when the managers that hold it never wrote it (see defaultedField), and
// reports whether it did. When it did not, why says, where it can, why the
// value is someone's.
func takeDefault(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, st stamp, conflict error) (took bool, why string, err error) {
	if len(st.defaulted) == 0 || reader == nil {
		return false, "", nil
	}
	managers, resourceVersion, why, err := defaultedField(ctx, reader, obj, st, conflict)
	if err != nil || len(managers) == 0 {
		return false, why, err
	}
	switch err := applyDefaultedField(ctx, c, obj, resourceVersion, st); {
	case apierrors.IsConflict(err):
		return false, "the object changed while it was checked", nil
	case err != nil:
		return false, "", err
	}
	logf.FromContext(ctx).Info("took a defaulted field its owner never wrote", "kind", st.gvk.Kind, "name", obj.GetName(), "namespace", obj.GetNamespace(),
		"field", strings.Join(st.defaulted, "."), "managers", managers)
	return true, "", nil
}

// defaultedPropagationPolicy is the field of a ManifestWork its CRD
// defaults (to Foreground) when a deleteOption is written without it.
var defaultedPropagationPolicy = []string{"spec", "deleteOption", "propagationPolicy"}

// applyDefaultedField applies the stamp's defaulted field alone, forced, under
// the operator's field manager, with the UID precondition and the
// resourceVersion that was checked: it takes that one field from the
// managers that hold it only because the API server defaulted it for them,
// and fails if anyone wrote the object since.
func applyDefaultedField(ctx context.Context, c client.Client, obj client.Object, resourceVersion string, st stamp) error {
	value, found, err := unstructured.NestedFieldNoCopy(map[string]any{"spec": st.spec()}, st.defaulted...)
	if err != nil || !found {
		return fmt.Errorf("the stamp does not set %s", strings.Join(st.defaulted, "."))
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": st.gvk.GroupVersion().String(), "kind": st.gvk.Kind,
		"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace(), "uid": string(obj.GetUID()),
			"resourceVersion": resourceVersion},
	}}
	if err := unstructured.SetNestedField(patch.Object, value, st.defaulted...); err != nil {
		return err
	}
	return c.Patch(ctx, patch, client.Apply, client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership)
}

// sentField says whether a last-applied configuration holds path.
func sentField(lastApplied string, path []string) (bool, error) {
	var sent map[string]any
	if err := json.Unmarshal([]byte(lastApplied), &sent); err != nil {
		return false, err
	}
	_, found, err := unstructured.NestedFieldNoCopy(sent, path...)
	if err != nil {
		return true, nil // a parent that is not an object: it was sent as something
	}
	return found, nil
}
