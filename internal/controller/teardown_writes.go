package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// The writes of a teardown step. Each takes the plan's action and writes
// on exactly its object: the UID is a precondition of every write, and a
// work is deleted only at the resourceVersion the plan decided on.

// label puts the cluster-deleting label on the cluster namespace, or takes
// it off.
func (a *ManagedClusterAdapter) label(ctx context.Context, act decision.Action) error {
	return a.setDeletingLabel(ctx, act.Name, act.UID, act.ResourceVersion, act.Verb == decision.VerbLabel)
}

// deleteParallelism bounds the deletes one cluster has in flight at once.
const deleteParallelism = 16

// deleteObjects deletes the objects, up to deleteParallelism at once, and
// remembers each, so that it is not deleted again while the cache catches
// up. A work changed since the plan read it is not deleted: its event
// brings the cluster back, and the plan checks it again.
func (a *ManagedClusterAdapter) deleteObjects(ctx context.Context, mc *unstructured.Unstructured, acts []decision.Action) (sets.Set[types.UID], error) {
	var mu sync.Mutex
	done := sets.New[types.UID]()
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(deleteParallelism)
	for _, act := range acts {
		eg.Go(func() error {
			// Through the unstructured client: the metadata client cannot
			// decode the object a DELETE returns while finalizers hold it.
			target := &unstructured.Unstructured{}
			if act.Meta != nil {
				target.SetGroupVersionKind(act.Meta.GroupVersionKind())
			} else {
				target.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
			}
			target.SetNamespace(act.Namespace)
			target.SetName(act.Name)
			pre := client.Preconditions{UID: &act.UID}
			if act.ResourceVersion != "" {
				pre.ResourceVersion = &act.ResourceVersion
			}
			err := a.Client.Delete(ctx, target, pre)
			switch {
			case apierrors.IsConflict(err):
				return nil // replaced or changed meanwhile: the watch brings it
			case client.IgnoreNotFound(err) != nil:
				return fmt.Errorf("deleting %s/%s in %s: %w", act.Resource, act.Name, act.Namespace, err)
			case err != nil:
				return nil
			}
			a.deleted(mc, act)
			mu.Lock()
			done.Insert(act.UID)
			mu.Unlock()
			return nil
		})
	}
	return done, eg.Wait()
}

// deleteAll deletes the objects: a group the plan sends as a collection in
// one deletecollection when the namespace holds exactly that group, the
// others one by one.
func (a *ManagedClusterAdapter) deleteAll(ctx context.Context, mc *unstructured.Unstructured, plan *decision.Plan, acts []decision.Action) (sets.Set[types.UID], error) {
	var each, collection []decision.Action
	for _, act := range acts {
		if act.Collection {
			collection = append(collection, act)
		} else {
			each = append(each, act)
		}
	}
	done := sets.New[types.UID]()
	if len(collection) > 0 {
		ok, sent, err := a.deleteCollection(ctx, mc, plan, collection)
		switch {
		case ok:
			for _, act := range collection {
				done.Insert(act.UID)
			}
		case sent:
			// Refused part way, or failed after the server may have
			// deleted some: those are recorded, once, even when the
			// request's own context is what ended it.
			readCtx := ctx
			if ctx.Err() != nil {
				var cancel context.CancelFunc
				readCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
			}
			rest, deleted, rerr := a.notDeletedYet(readCtx, mc, collection)
			if err != nil || rerr != nil {
				return deleted, errors.Join(err, rerr)
			}
			done, each = deleted, append(each, rest...)
		case err != nil:
			return done, err
		default:
			each = append(each, collection...)
		}
	}
	one, err := a.deleteObjects(ctx, mc, each)
	return done.Union(one), err
}

// notDeletedYet sorts the objects of a deletecollection the API server
// refused part way: one it deleted already (the same UID, now being
// deleted) is recorded once and not deleted again; one that is gone is
// left to the next plan; the others are to be deleted one by one, each
// with its preconditions.
func (a *ManagedClusterAdapter) notDeletedYet(ctx context.Context, mc *unstructured.Unstructured, acts []decision.Action) ([]decision.Action, sets.Set[types.UID], error) {
	done := sets.New[types.UID]()
	var rest []decision.Action
	for _, act := range acts {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(act.Meta.GroupVersionKind())
		err := a.apiReader.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: act.Name}, live)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			// What is recorded so far stays recorded.
			return nil, done, fmt.Errorf("reading %s/%s in %s: %w", act.Resource, act.Name, act.Namespace, err)
		case live.UID == act.UID && live.DeletionTimestamp != nil:
			a.deleted(mc, act)
			done.Insert(act.UID)
		default:
			rest = append(rest, act)
		}
	}
	return rest, done, nil
}

// deleteCollection deletes a group of objects, the whole of their resource
// in the cluster namespace, in one deletecollection, and says whether it
// did, and whether it sent the request; not ok: the objects are to be
// deleted one by one. The API server lists the objects with the request's
// options, then deletes each of that list BY NAME, one after another,
// with no UID or resourceVersion precondition. So the request names the
// snapshot to delete, and what could change at a name after the check is
// kept out:
//   - the live list (not the cache) holds exactly the plan's objects (same
//     UIDs, each at the resourceVersion the plan decided on, none being
//     deleted), and the deletecollection lists that list's resourceVersion
//     exactly: an object that appears after it is not in the snapshot, one
//     that appeared before fails the check;
//   - the cluster namespace, read live, carries the deleting label, and
//     the admission policy and binding in force are the operator's as
//     admissionpolicy.Objects makes them, unchanged for AdmissionSettle
//     (each API server's admission reads them from a watch), and a
//     dry-run create of a work in the namespace is refused by that policy:
//     no object can be created in the namespace, so none is re-created
//     under a name of the snapshot (another UID) before the server deletes
//     that name.
//
// What remains (docs/developer/performance.md): an object of the snapshot changed,
// not re-created, between the check and the server's delete of its name is
// deleted as the plan decided, with its then-current spec (a work's
// deleteOption); the plan marks a collection only where no such change can
// make the policy keep the object or move it to another stage
// (decision.collectable). The deletion-signal work, and any object of the
// operator's, is left out by the selectors of both, whatever the plan
// says.
func (a *ManagedClusterAdapter) deleteCollection(ctx context.Context, mc *unstructured.Unstructured, plan *decision.Plan, acts []decision.Action) (ok, sent bool, err error) {
	log := logf.FromContext(ctx)
	first := acts[0]
	if first.Meta == nil || first.Namespace != plan.Cluster || !decision.AdmissionGuarded(schema.ParseGroupResource(first.Resource).WithVersion("")) {
		return false, false, nil
	}
	why, err := a.admissionInForce(ctx)
	if err != nil || why != "" {
		log.Info("deleting one by one: the admission policy that refuses new objects is not known to be in force", "cluster", mc.GetName(),
			"reason", why, "error", err)
		return false, false, nil
	}
	var ns corev1.Namespace
	if err := a.apiReader.Get(ctx, client.ObjectKey{Name: first.Namespace}, &ns); err != nil || ns.Labels[v1alpha1.ClusterDeletingLabel] != "true" {
		log.Info("deleting one by one: the cluster namespace, read live, does not carry the deleting label",
			"cluster", mc.GetName(), "namespace", first.Namespace, "error", err)
		return false, false, nil
	}
	// The admission plugin reads the namespace's labels from a watch too: a
	// label written moments ago may not be seen yet. A dry-run create must
	// be refused by the operator's policy.
	if refused, err := a.admissionRefuses(ctx, first.Namespace); err != nil || !refused {
		log.Info("deleting one by one: the API server does not refuse a new work in the namespace yet",
			"cluster", mc.GetName(), "namespace", first.Namespace, "error", err)
		return false, false, nil
	}
	gvk := first.Meta.GroupVersionKind()
	want := map[types.UID]string{}
	for _, act := range acts {
		if act.Namespace != first.Namespace || act.Meta == nil || act.Meta.GroupVersionKind() != gvk {
			return false, false, nil
		}
		want[act.UID] = cmp.Or(act.ResourceVersion, act.Meta.ResourceVersion)
	}
	selectors := []client.ListOption{client.InNamespace(first.Namespace), notOperatorsObjects(), notNamed(signalName(plan))}
	live := &metav1.PartialObjectMetadataList{}
	live.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := a.apiReader.List(ctx, live, selectors...); err != nil {
		if apierrors.IsForbidden(err) {
			log.Info("deleting one by one: the live list is forbidden", "cluster", mc.GetName(), "error", err.Error())
			return false, false, nil
		}
		return false, false, fmt.Errorf("listing %s in %s: %w", first.Resource, first.Namespace, err)
	}
	if len(live.Items) != len(want) {
		log.Info("deleting one by one: the namespace holds other objects than the plan's", "cluster", mc.GetName(),
			"resource", first.Resource, "planned", len(want), "live", len(live.Items))
		return false, false, nil
	}
	for _, o := range live.Items {
		rv, ok := want[o.UID]
		if !ok || rv != o.ResourceVersion || o.DeletionTimestamp != nil {
			log.Info("deleting one by one: an object changed since the plan", "cluster", mc.GetName(), "resource", first.Resource, "name", o.Name)
			return false, false, nil
		}
	}
	if a.beforeCollection != nil {
		a.beforeCollection()
	}
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(gvk)
	deleteOpts := []client.DeleteAllOfOption{client.InNamespace(first.Namespace), notOperatorsObjects(), notNamed(signalName(plan)),
		&client.DeleteAllOfOptions{ListOptions: client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: live.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}}}}
	if err := a.Client.DeleteAllOf(ctx, target, deleteOpts...); err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) {
			// The snapshot is compacted away, the operator may not delete
			// a collection (a ClusterRole of an older version), or an
			// admission check refused one of the objects: the group goes
			// one by one, each with its preconditions; one the request
			// deleted already is not deleted again (notDeletedYet).
			log.Info("deleting one by one: the deletecollection was refused", "cluster", mc.GetName(), "error", err.Error())
			return false, true, nil
		}
		return false, true, fmt.Errorf("deleting the %d %s of %s: %w", len(acts), first.Resource, first.Namespace, err)
	}
	for _, act := range acts {
		a.deleted(mc, act)
	}
	log.Info("deleted a group in one request", "cluster", mc.GetName(), "resource", first.Resource, "count", len(acts))
	return true, true, nil
}

// AdmissionSettle is how long the admission policy that refuses new
// objects in a deleting cluster's namespace, and its binding, must have
// been as they are (created, or last written) before a group is deleted in
// one request: each API server loads them from a watch, so one written
// moments ago may not be enforced everywhere yet.
//
// It is a margin over the delay of a watch, not a proof: docs/developer/performance.md.
const AdmissionSettle = 5 * time.Second

// admissionInForce says why the admission policy that refuses new
// ManifestWorks and ManagedClusterAddOns in a deleting cluster's namespace
// is not known to be in force ("" when it is): it and its binding must
// exist, not be being deleted, equal what admissionpolicy.Objects makes
// (rules, match conditions, validations; the binding's policy, match
// resources and actions: an administrator's edit, even one that narrows
// them, means no collection), and not have been written for
// a.admissionSettle.
func (a *ManagedClusterAdapter) admissionInForce(ctx context.Context) (string, error) {
	var wantPolicy *admissionregistrationv1.ValidatingAdmissionPolicy
	var wantBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, obj := range admissionpolicy.Objects() {
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if o.Name == admissionpolicy.DeletingClusterPolicy {
				wantPolicy = o
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			if o.Name == admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy) {
				wantBinding = o
			}
		}
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	if err := a.apiReader.Get(ctx, client.ObjectKeyFromObject(wantPolicy), &policy); err != nil {
		return "the policy cannot be read", client.IgnoreNotFound(err)
	}
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := a.apiReader.Get(ctx, client.ObjectKeyFromObject(wantBinding), &binding); err != nil {
		return "the binding cannot be read", client.IgnoreNotFound(err)
	}
	switch {
	case policy.DeletionTimestamp != nil || binding.DeletionTimestamp != nil:
		return "the policy or its binding is being deleted", nil
	case !equality.Semantic.DeepEqual(defaultedPolicy(policy.Spec), defaultedPolicy(wantPolicy.Spec)):
		return "the policy differs from the operator's", nil
	case !equality.Semantic.DeepEqual(defaultedBinding(binding.Spec), defaultedBinding(wantBinding.Spec)):
		return "the binding differs from the operator's", nil
	case time.Since(lastWritten(&policy)) < a.admissionSettle || time.Since(lastWritten(&binding)) < a.admissionSettle:
		return fmt.Sprintf("the policy or its binding was written less than %s ago", a.admissionSettle), nil
	}
	return "", nil
}

// admissionProbe names the work a dry-run create asks the API server for.
const admissionProbe = "cleanup-operator-admission-probe"

// admissionRefuses says whether the API server refuses, by the operator's
// admission policy, a new ManifestWork in the namespace: a dry run, which
// writes nothing.
func (a *ManagedClusterAdapter) admissionRefuses(ctx context.Context, namespace string) (bool, error) {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": decision.ManifestWorks.GroupVersion().String(), "kind": "ManifestWork",
		"metadata": map[string]any{"name": admissionProbe, "namespace": namespace,
			"labels": map[string]any{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}},
		"spec": map[string]any{"workload": map[string]any{}},
	}}
	err := a.Client.Create(ctx, probe, client.DryRunAll)
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), admissionpolicy.DeletingClusterPolicy):
		return true, nil
	case apierrors.IsForbidden(err) || apierrors.IsAlreadyExists(err):
		return false, nil
	}
	return false, err
}

// lastWritten is when the object was created or last written, as its
// managed fields record.
func lastWritten(obj metav1.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

// defaultedPolicy is a policy's spec with the API server's defaults set,
// to compare one as created with one as read.
func defaultedPolicy(spec admissionregistrationv1.ValidatingAdmissionPolicySpec) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	spec = *spec.DeepCopy()
	if spec.FailurePolicy == nil {
		spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	}
	spec.MatchConstraints = defaultedMatch(spec.MatchConstraints)
	return spec
}

// defaultedBinding is a binding's spec with the API server's defaults set;
// match resources that select nothing more than the policy are none.
func defaultedBinding(spec admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec) admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec {
	spec = *spec.DeepCopy()
	spec.MatchResources = defaultedMatch(spec.MatchResources)
	if spec.MatchResources != nil && equality.Semantic.DeepEqual(*spec.MatchResources, *defaultedMatch(&admissionregistrationv1.MatchResources{})) {
		spec.MatchResources = nil
	}
	return spec
}

func defaultedMatch(m *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
	if m == nil {
		return nil
	}
	m = m.DeepCopy()
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				rules[i].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}
		}
	}
	return m
}

// notOperatorsObjects selects the objects without the operator's
// managed-by label: never the deletion-signal work.
func notOperatorsObjects() client.MatchingLabelsSelector {
	req, _ := labels.NewRequirement(v1alpha1.ManagedByLabel, selection.NotEquals, []string{v1alpha1.ManagedBy})
	return client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}
}

// notNamed selects the objects not of that name (every one for "").
func notNamed(name string) client.MatchingFieldsSelector {
	if name == "" {
		return client.MatchingFieldsSelector{Selector: fields.Everything()}
	}
	return client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("metadata.name", name)}
}

// signalName is the name of the plan's deletion-signal work, if any.
func signalName(plan *decision.Plan) string {
	for _, st := range plan.Steps {
		if st.Kind == decision.StepSignal {
			return st.Name
		}
	}
	return ""
}

// deleted records a delete: in memory, in metrics, and for the cluster
// namespace in an Event.
func (a *ManagedClusterAdapter) deleted(mc *unstructured.Unstructured, act decision.Action) {
	a.inflight.add(deleted, mc.GetName(), act.UID)
	if act.Resource == decision.NamespacesResource {
		a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, v1alpha1.DeletingNamespaceReason, "Cleanup", "deleted namespace %s", act.Name)
		return
	}
	resource, _, _ := strings.Cut(act.Resource, ".")
	a.Metrics.DeletedObjects.WithLabelValues(resource).Inc()
}

// force removes the work agent's finalizer from the objects, after
// recording them on the cluster, and reports every forced object.
func (a *ManagedClusterAdapter) force(ctx context.Context, mc *unstructured.Unstructured, plan *decision.Plan, acts []decision.Action) error {
	if len(acts) == 0 {
		return nil
	}
	if err := a.recordForcing(ctx, mc, acts); err != nil {
		return err
	}
	var forced []string
	for _, act := range acts {
		patch, _ := removeFinalizerPatch(act.Meta, act.Finalizer, nil)
		if err := a.Client.Patch(ctx, act.Meta, patch); client.IgnoreNotFound(err) != nil {
			if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
				continue // the finalizers changed meanwhile: the watch brings the object back
			}
			return fmt.Errorf("removing the work agent's finalizer from %s: %w", actionKey(act), err)
		}
		a.inflight.add(forcedSet, mc.GetName(), act.UID)
		resource, _, _ := strings.Cut(act.Resource, ".")
		a.Metrics.ForcedObjects.WithLabelValues(resource).Inc()
		forced = append(forced, actionKey(act))
	}
	if len(forced) > 0 {
		why, _, _ := strings.Cut(acts[0].For, ";")
		a.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, v1alpha1.ForcedReason, eventAction("Force/"+forced[0]),
			"%s (%s): removed the work agent's finalizer from %s", plan.Strategy, why, strings.Join(forced, ", "))
	}
	return nil
}

// actionKey names an action's object as messages do: resource/name.
func actionKey(act decision.Action) string {
	resource, _, _ := strings.Cut(act.Resource, ".")
	return resource + "/" + act.Name
}

// recordForcing writes, before any finalizer is removed, the count of
// forced objects and the batch about to be forced, so that a cleanup never
// ends as Completed after a crash or a failed write, and an object of a
// batch cut short is not counted twice when the next one forces it. It
// writes on the cluster as read, so no record written meanwhile is lost.
func (a *ManagedClusterAdapter) recordForcing(ctx context.Context, mc *unstructured.Unstructured, batch []decision.Action) error {
	counted := sets.New[string]()
	if v := mc.GetAnnotations()[v1alpha1.ForcingAnnotation]; v != "" {
		counted.Insert(strings.Split(v, ",")...)
	}
	total := decision.ForcedCount(mc)
	keys := make([]string, len(batch))
	for i, act := range batch {
		keys[i] = actionKey(act)
		if !counted.Has(keys[i]) {
			total++
		}
	}
	before := mc.DeepCopy()
	setAnnotation(mc, v1alpha1.ForcedObjectsAnnotation, strconv.Itoa(total))
	setAnnotation(mc, v1alpha1.ForcingAnnotation, strings.Join(keys, ","))
	if err := a.Client.Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the forced objects of %s: %w", mc.GetName(), err)
	}
	return nil
}

// recordUnconfirmed writes the works about to be deleted with an orphan
// the agent never confirmed on the cluster, before they are deleted, and
// reports them once (Event, metric).
func (a *ManagedClusterAdapter) recordUnconfirmed(ctx context.Context, mc *unstructured.Unstructured, plan *decision.Plan, act decision.Action) error {
	recorded := sets.New(decision.UnconfirmedOrphans(mc)...).Insert(act.Objects...)
	before := mc.DeepCopy()
	setAnnotation(mc, v1alpha1.UnconfirmedOrphansAnnotation, strings.Join(sets.List(recorded), ","))
	// On the cluster as read: a record written meanwhile is not lost.
	if err := a.Client.Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the unconfirmed orphans of %s: %w", mc.GetName(), err)
	}
	a.Metrics.UnconfirmedOrphans.Add(float64(len(act.Objects)))
	a.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, v1alpha1.OrphanNotConfirmedReason, eventAction("Orphan/"+act.Objects[0]),
		"orphan not confirmed by the agent: %s (%s: %s)", strings.Join(act.Objects, ", "), plan.Strategy, act.For)
	return nil
}

// removeFinalizer removes the operator's finalizer, and the annotations the
// action names, from the cluster, then reports the outcome's event.
func (a *ManagedClusterAdapter) removeFinalizer(ctx context.Context, mc *unstructured.Unstructured, act decision.Action, r *decision.Report) error {
	patch, ok := removeFinalizerPatch(mc, act.Finalizer, act.Annotations)
	if !ok || a.inflight.finished(mc.GetUID()) {
		return nil // a cache that has not caught up yet
	}
	if err := a.Client.Patch(ctx, mc, patch); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return fmt.Errorf("the finalizers of %s changed meanwhile, retrying: %w", mc.GetName(), err)
		}
		return client.IgnoreNotFound(err)
	}
	a.inflight.forgetCluster(mc.GetName())
	a.inflight.finish(mc.GetUID())
	a.progress.forget(mc.GetUID())
	a.records.finished(mc)
	a.Metrics.forget(mc.GetName())
	a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, r.Event, "Cleanup", "%s", r.Message)
	logf.FromContext(ctx).Info("cluster cleanup finished", "cluster", mc.GetName(), "reason", r.Event)
	return nil
}

// removeFinalizerPatch is a JSON patch removing one finalizer, and the
// given annotations, valid only while the finalizer is still where obj has
// it: it removes exactly it, whatever else changed meanwhile.
func removeFinalizerPatch(obj metav1.Object, finalizer string, annotations []string) (client.Patch, bool) {
	i := slices.Index(obj.GetFinalizers(), finalizer)
	if i < 0 {
		return nil, false
	}
	ops := []string{
		fmt.Sprintf(`{"op":"test","path":"/metadata/uid","value":%q}`, obj.GetUID()),
		fmt.Sprintf(`{"op":"test","path":"/metadata/finalizers/%d","value":%q}`, i, finalizer),
		fmt.Sprintf(`{"op":"remove","path":"/metadata/finalizers/%d"}`, i),
	}
	for _, key := range annotations {
		if _, ok := obj.GetAnnotations()[key]; ok {
			path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
			ops = append(ops, fmt.Sprintf(`{"op":"remove","path":%q}`, path))
		}
	}
	return client.RawPatch(types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]")), true
}

// trackNotOwned keeps the tally of signal works the operator leaves alone
// in step with the plan: the hold of a not-owned signal work is reported
// under the policy, once; an owned or absent one clears it.
func (a *ManagedClusterAdapter) trackNotOwned(plan *decision.Plan, s *decision.Snapshot) {
	for _, st := range plan.Steps {
		if st.Kind != decision.StepSignal || st.State == decision.StateLater {
			continue
		}
		for _, act := range st.Actions {
			if act.Namespace == "" {
				continue
			}
			key := "ManifestWork " + act.Namespace + "/" + act.Name
			if act.Verb != decision.VerbHold {
				clearNotOwned(a.Tally, key)
			} else if !plan.DryRun && s.Cluster != nil {
				reportNotOwned(a.Tally, a.Recorder, plan.Policy, key, act.For, policyRef(plan.Policy, plan.PolicyUID))
			}
			return
		}
		clearNotOwnedWorks(a.Tally, plan.Cluster)
	}
}
