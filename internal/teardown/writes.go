package teardown

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
)

// The writes of a teardown step. Each takes the plan's action and writes
// on exactly its object: the UID is a precondition of every write, and a
// work is deleted only at the resourceVersion the plan decided on.

// label puts the cluster-deleting label on the cluster namespace, or takes
// it off, and says whether it did: not when the namespace changed since
// the plan read it, nor when this process already wrote it over the
// namespace as read (a cache behind its own write, which would only be
// refused).
func (a *ClusterTeardown) label(ctx context.Context, st *teardownState, act decision.Action) (written bool, err error) {
	if st.labelUnseen(act) {
		return false, nil
	}
	if act.Verb == decision.VerbLabel {
		written, err = a.setDeletingLabel(ctx, act.Name, act.UID, act.ResourceVersion, true)
	} else {
		m := markOf("")
		m.labels[v1alpha1.ClusterDeletingLabel] = nil
		written, err = a.patchNamespace(ctx, act.Name, act.UID, act.ResourceVersion, m, "unlabelled")
	}
	if written {
		st.labelWritten(act)
	}
	return written, err
}

// labelKey names a label or unlabel of a namespace as the plan read it.
func labelKey(act decision.Action) string {
	return string(act.UID) + "/" + act.ResourceVersion + "/" + string(act.Verb)
}

// labelWritten remembers a label or unlabel this process wrote.
func (st *teardownState) labelWritten(act decision.Action) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.labelledOver = labelKey(act)
}

// labelUnseen says whether the plan's label or unlabel is one this process
// already wrote over the namespace as the plan read it: the cache has not
// caught up with it, and its event brings the cluster back.
func (st *teardownState) labelUnseen(act decision.Action) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return act.ResourceVersion != "" && st.labelledOver == labelKey(act)
}

// deleteParallelism bounds the deletes one cluster has in flight at once.
const deleteParallelism = 16

// deleteObjects deletes the objects, up to deleteParallelism at once, and
// remembers each, so that it is not deleted again while the cache catches
// up. A work changed since the plan read it is not deleted: its event
// brings the cluster back, and the plan checks it again.
func (a *ClusterTeardown) deleteObjects(ctx context.Context, acts []decision.Action) (sets.Set[types.UID], error) {
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
			a.deleted(act)
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
func (a *ClusterTeardown) deleteAll(ctx context.Context, mc *unstructured.Unstructured, plan *decision.Plan, acts []decision.Action) (sets.Set[types.UID], error) {
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
	one, err := a.deleteObjects(ctx, each)
	if one.Len() > 0 {
		// No Event says it: the teardown record lists each object.
		logf.FromContext(ctx).Info("deleted one by one", "cluster", mc.GetName(), "resource", each[0].Resource, "count", one.Len())
	}
	return done.Union(one), err
}

// deleted counts a delete in metrics (not the cluster namespace's). The
// caller remembers it from what the delete returns.
func (a *ClusterTeardown) deleted(act decision.Action) {
	if act.Resource == decision.NamespacesResource {
		return
	}
	resource, _, _ := strings.Cut(act.Resource, ".")
	a.Metrics.DeletedObjects.WithLabelValues(resource).Inc()
}

// force removes the work agent's finalizer from the objects, after
// recording them on the cluster, reports every forced object, and returns
// the objects it forced.
func (a *ClusterTeardown) force(ctx context.Context, cluster *clusterPatch, plan *decision.Plan, acts []decision.Action) (sets.Set[types.UID], error) {
	done := sets.New[types.UID]()
	if len(acts) == 0 {
		return done, nil
	}
	recordForcing(cluster, acts)
	if _, err := cluster.flushForcing(ctx); err != nil {
		return done, err
	}
	mc := cluster.mc
	var forced []string
	for _, act := range acts {
		patch, _ := removeFinalizerPatch(act.Meta, act.Finalizer, nil, false)
		if err := a.Client.Patch(ctx, act.Meta, patch); client.IgnoreNotFound(err) != nil {
			if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
				continue // the finalizers changed meanwhile: the watch brings the object back
			}
			return done, fmt.Errorf("removing the work agent's finalizer from %s: %w", actionKey(act), err)
		}
		done.Insert(act.UID)
		resource, _, _ := strings.Cut(act.Resource, ".")
		a.Metrics.ForcedObjects.WithLabelValues(resource).Inc()
		forced = append(forced, actionKey(act))
	}
	if len(forced) > 0 {
		why, _, _ := strings.Cut(acts[0].For, ";")
		a.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, v1alpha1.ForcedReason, eventAction("Force/"+forced[0]),
			"%s (%s): removed the work agent's finalizer from %s", plan.Strategy, why, strings.Join(forced, ", "))
	}
	return done, nil
}

// actionKey names an action's object as messages do: resource/name.
func actionKey(act decision.Action) string {
	resource, _, _ := strings.Cut(act.Resource, ".")
	return resource + "/" + act.Name
}

// recordForcing sets, in memory, the count of forced objects and the batch
// about to be forced; flushed before any finalizer is removed, they make
// sure a cleanup never ends as Completed after a crash or a failed write,
// and that an object of a batch cut short is not counted twice when the
// next one forces it.
func recordForcing(cluster *clusterPatch, batch []decision.Action) {
	mc := cluster.mc
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
	cluster.annotate(v1alpha1.ForcedObjectsAnnotation, strconv.Itoa(total))
	cluster.annotate(v1alpha1.ForcingAnnotation, strings.Join(keys, ","))
}

// recordUnconfirmed writes the works about to be deleted with an orphan
// the agent never confirmed on the cluster, before they are deleted, and
// reports them once (Event, metric).
func (a *ClusterTeardown) recordUnconfirmed(ctx context.Context, cluster *clusterPatch, plan *decision.Plan, act decision.Action) error {
	mc := cluster.mc
	recorded := sets.New(decision.UnconfirmedOrphans(mc)...).Insert(act.Objects...)
	cluster.annotate(v1alpha1.UnconfirmedOrphansAnnotation, strings.Join(sets.List(recorded), ","))
	// On the cluster as read: a record written meanwhile is not lost.
	if _, err := cluster.flushUnconfirmed(ctx); err != nil {
		return err
	}
	a.Metrics.UnconfirmedOrphans.Add(float64(len(act.Objects)))
	a.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, v1alpha1.OrphanNotConfirmedReason, eventAction("Orphan/"+act.Objects[0]),
		"orphan not confirmed by the agent: %s (%s: %s)", strings.Join(act.Objects, ", "), plan.Strategy, act.For)
	return nil
}

// removeFinalizer removes the operator's finalizer, and the annotations the
// action names, from the cluster, then reports the outcome's event; only
// if it is still the cluster's only finalizer when last is true.
func (a *ClusterTeardown) removeFinalizer(ctx context.Context, cluster *clusterPatch, act decision.Action, r *decision.Report, last bool) error {
	mc := cluster.mc
	if a.Teardowns.isFinished(mc.GetUID()) {
		return nil // a cache that has not caught up yet
	}
	removed, err := cluster.removeFinalizer(ctx, act.Finalizer, act.Annotations, last)
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		return fmt.Errorf("%s changed meanwhile, retrying: %w", mc.GetName(), err)
	case err != nil || !removed:
		return client.IgnoreNotFound(err) // not removed: a cache that has not caught up yet
	}
	if r.Reason != "" {
		a.Metrics.Done(r.Reason, time.Since(mc.GetDeletionTimestamp().Time))
	}
	a.Teardowns.end(mc.GetUID(), true)
	a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, r.Event, "Cleanup", "%s", r.Message)
	logf.FromContext(ctx).Info("cluster cleanup finished", "cluster", mc.GetName(), "reason", r.Event)
	return nil
}

// removeFinalizerPatch is a JSON patch removing one finalizer, and the
// given annotations, valid only while the finalizer is still where obj has
// it (and, when only is true, still the only one): it removes exactly it,
// whatever else changed meanwhile.
func removeFinalizerPatch(obj metav1.Object, finalizer string, annotations []string, only bool) (client.Patch, bool) {
	i := slices.Index(obj.GetFinalizers(), finalizer)
	if i < 0 {
		return nil, false
	}
	at := fmt.Sprintf(`{"op":"test","path":"/metadata/finalizers/%d","value":%q}`, i, finalizer)
	if only {
		at = fmt.Sprintf(`{"op":"test","path":"/metadata/finalizers","value":[%q]}`, finalizer)
	}
	ops := []string{
		fmt.Sprintf(`{"op":"test","path":"/metadata/uid","value":%q}`, obj.GetUID()),
		at,
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
func (a *ClusterTeardown) trackNotOwned(plan *decision.Plan, s *decision.Snapshot) {
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
				tally.ClearNotOwned(a.Tally, key)
			} else if !plan.DryRun && s.Cluster != nil {
				tally.ReportNotOwned(a.Tally, a.Recorder, plan.Policy, key, act.For, tally.PolicyRef(plan.Policy, plan.PolicyUID))
			}
			return
		}
		tally.ClearNotOwnedWorks(a.Tally, plan.Cluster)
	}
}

// note marks a write of the notes the outcome is read from (the forced
// count, unconfirmed orphans).
func (st *teardownState) note() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.noted = true
}

// wroteNotes says whether note was called.
func (st *teardownState) wroteNotes() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.noted
}

// A group of objects of one resource in the cluster namespace may be
// deleted in one deletecollection that leaves out, by name, the other
// objects of the resource there (at most decision.MaxLeftOut). The API
// server lists the objects with the request's options, then deletes each
// of that list BY NAME, one after another, with no UID or resourceVersion
// precondition. So the request names the snapshot to delete, and what
// could change at a name after the check is kept out:
//   - the live list (not the cache), less the names left out, holds
//     exactly the plan's objects (same UIDs, each at the resourceVersion
//     the plan decided on, none being deleted), and the deletecollection
//     lists that list's resourceVersion exactly, with the same selectors:
//     an object that appears after it is not in the snapshot, one that
//     appeared before is left out by name or fails the check;
//   - the cluster namespace, read live, carries the deleting label, and
//     the admission policy and binding in force are the operator's as
//     admissionpolicy.Objects makes them, unchanged for AdmissionSettle
//     (each API server's admission reads them from a watch), and a
//     dry-run create of a work in the namespace is refused by that policy:
//     no object can be created in the namespace, so none is re-created
//     under a name of the snapshot (another UID) before the server deletes
//     that name, nor under a name left out.
//
// What remains (docs/developer/design.md, "One request for a group"): an
// object of the snapshot changed, not re-created, between the check and the
// server's delete of its name is deleted as the plan decided, with its
// then-current spec (a work's deleteOption); the plan marks a collection
// only where no such change can make the policy keep the object or move it
// to another stage (decision.collectable). The deletion-signal work, and any
// object of the operator's, is left out by the selectors of both, whatever
// the plan says.

// notDeletedYet sorts the objects of a deletecollection the API server
// refused part way: one it deleted already (the same UID, now being
// deleted) is recorded once and not deleted again; one that is gone is
// left to the next plan; the others are to be deleted one by one, each
// with its preconditions.
func (a *ClusterTeardown) notDeletedYet(ctx context.Context, mc *unstructured.Unstructured, acts []decision.Action) ([]decision.Action, sets.Set[types.UID], error) {
	done := sets.New[types.UID]()
	var rest []decision.Action
	for _, act := range acts {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(act.Meta.GroupVersionKind())
		err := a.APIReader.Get(ctx, client.ObjectKey{Namespace: act.Namespace, Name: act.Name}, live)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			// What is recorded so far stays recorded.
			return nil, done, fmt.Errorf("reading %s/%s in %s: %w", act.Resource, act.Name, act.Namespace, err)
		case live.UID == act.UID && live.DeletionTimestamp != nil:
			a.deleted(act)
			done.Insert(act.UID)
		default:
			rest = append(rest, act)
		}
	}
	return rest, done, nil
}

// deleteCollection deletes a group of objects, the whole of their resource
// in the cluster namespace, in one deletecollection when the checks the
// file's header gives hold, and says whether it did, and whether it sent
// the request; not ok: the objects are to be deleted one by one.
func (a *ClusterTeardown) deleteCollection(ctx context.Context, mc *unstructured.Unstructured, plan *decision.Plan, acts []decision.Action) (ok, sent bool, err error) {
	log := logf.FromContext(ctx)
	first := acts[0]
	if first.Meta == nil || first.Namespace != plan.Cluster || !decision.AdmissionGuarded(schema.ParseGroupResource(first.Resource).WithVersion("")) {
		return false, false, nil
	}
	if !a.namespaceClosed(ctx, mc, first.Namespace) {
		return false, false, nil
	}
	live, leftOut, err := a.exactlyPlanned(ctx, mc, plan, acts)
	if live == nil || err != nil {
		return false, false, err
	}
	if a.beforeCollection != nil {
		a.beforeCollection()
	}
	gvk := first.Meta.GroupVersionKind()
	target := &unstructured.Unstructured{}
	target.SetGroupVersionKind(gvk)
	deleteOpts := []client.DeleteAllOfOption{client.InNamespace(first.Namespace), notOperatorsObjects(), notNamed(append(leftOut, signalName(plan))...),
		&client.DeleteAllOfOptions{ListOptions: client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: live.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}}}}
	if err := a.Client.DeleteAllOf(ctx, target, deleteOpts...); err != nil {
		if refusedCollection(err) {
			// The snapshot is compacted away, the operator may not delete
			// a collection (a ClusterRole without deletecollection), an
			// admission check refused one of the objects, or a proxy
			// refused the request's length: the group goes one by one,
			// each with its preconditions; one the request deleted
			// already is not deleted again (notDeletedYet).
			log.Info("deleting one by one: the deletecollection was refused", "cluster", mc.GetName(), "error", err.Error())
			return false, true, nil
		}
		return false, true, fmt.Errorf("deleting the %d %s of %s: %w", len(acts), first.Resource, first.Namespace, err)
	}
	for _, act := range acts {
		a.deleted(act)
	}
	log.Info("deleted a group in one request", "cluster", mc.GetName(), "resource", first.Resource, "count", len(acts), "leftOut", len(leftOut))
	return true, true, nil
}

// refusedCollection says whether a deletecollection was refused in a way
// the deletes one by one are not: its snapshot compacted away (410), a
// collection or one of its objects forbidden (403), the verb not served
// (405), or the request refused as too long or malformed by a proxy in
// front of the API server (400, 413, 414).
func refusedCollection(err error) bool {
	var status apierrors.APIStatus
	tooLong := errors.As(err, &status) && status.Status().Code == http.StatusRequestURITooLong
	return tooLong || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.IsForbidden(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// maxLeftOutQuery bounds the field selector of a deletecollection, as its
// query string carries it, so that the request line stays within 8 KiB,
// the smallest limit proxies in front of an API server commonly set.
const maxLeftOutQuery = 7680

// namespaceClosed says whether no object can be created in the cluster
// namespace: the operator's admission policy is in force, the namespace,
// read live, carries the deleting label, and a dry-run create is refused.
func (a *ClusterTeardown) namespaceClosed(ctx context.Context, mc *unstructured.Unstructured, namespace string) bool {
	log := logf.FromContext(ctx)
	why, versions, err := a.admissionInForce(ctx)
	if err != nil || why != "" {
		log.Info("deleting one by one: the admission policy that refuses new objects is not known to be in force", "cluster", mc.GetName(),
			"reason", why, "error", err)
		return false
	}
	var ns corev1.Namespace
	if err := a.APIReader.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil || ns.Labels[v1alpha1.ClusterDeletingLabel] != "true" {
		log.Info("deleting one by one: the cluster namespace, read live, does not carry the deleting label",
			"cluster", mc.GetName(), "namespace", namespace, "error", err)
		return false
	}
	// The admission plugin reads the namespace's labels from a watch too: a
	// label written moments ago may not be seen yet. A dry-run create must
	// be refused by the operator's policy, once per teardown and process
	// while neither the namespace nor the policy or its binding is written
	// again: a later group of the same teardown needs no new probe. (A
	// write that put the policy back as the operator renders it may leave
	// no trace the settle sees; it is probed again.)
	versions = ns.ResourceVersion + "," + versions
	st := a.Teardowns.peek(mc.GetUID())
	if st != nil && st.closedSince(versions) {
		return true
	}
	if refused, err := a.admissionRefuses(ctx, namespace); err != nil || !refused {
		log.Info("deleting one by one: the API server does not refuse a new work in the namespace yet",
			"cluster", mc.GetName(), "namespace", namespace, "error", err)
		return false
	}
	if st != nil {
		st.closed(versions)
	}
	return true
}

// exactlyPlanned lists the group's resource in the namespace live, and
// returns the list and the names it leaves out (every object not of the
// group, at most a.maxLeftOut) when it holds each of the plan's objects at
// the resourceVersion the plan decided on, none being deleted; nil when
// not.
func (a *ClusterTeardown) exactlyPlanned(ctx context.Context, mc *unstructured.Unstructured, plan *decision.Plan, acts []decision.Action) (*metav1.PartialObjectMetadataList, []string, error) {
	log := logf.FromContext(ctx)
	first := acts[0]
	gvk := first.Meta.GroupVersionKind()
	want := map[types.UID]string{}
	for _, act := range acts {
		if act.Namespace != first.Namespace || act.Meta == nil || act.Meta.GroupVersionKind() != gvk {
			return nil, nil, nil
		}
		want[act.UID] = cmp.Or(act.ResourceVersion, act.Meta.ResourceVersion)
	}
	selectors := []client.ListOption{client.InNamespace(first.Namespace), notOperatorsObjects(), notNamed(signalName(plan))}
	live := &metav1.PartialObjectMetadataList{}
	live.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := a.APIReader.List(ctx, live, selectors...); err != nil {
		if apierrors.IsForbidden(err) {
			log.Info("deleting one by one: the live list is forbidden", "cluster", mc.GetName(), "error", err.Error())
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("listing %s in %s: %w", first.Resource, first.Namespace, err)
	}
	var leftOut []string
	for _, o := range live.Items {
		rv, planned := want[o.UID]
		switch {
		case !planned:
			leftOut = append(leftOut, o.Name)
		case rv != o.ResourceVersion || o.DeletionTimestamp != nil:
			log.Info("deleting one by one: an object changed since the plan", "cluster", mc.GetName(), "resource", first.Resource, "name", o.Name)
			return nil, nil, nil
		}
	}
	query := len(url.QueryEscape(notNamed(append(leftOut, signalName(plan))...).Selector.String()))
	if found := len(live.Items) - len(leftOut); found != len(want) || len(leftOut) > cmp.Or(a.maxLeftOut, decision.MaxLeftOut) || query > maxLeftOutQuery {
		log.Info("deleting one by one: the namespace does not hold the plan's objects, or holds too many others to leave out by name",
			"cluster", mc.GetName(), "resource", first.Resource, "planned", len(want), "found", found, "leftOut", len(leftOut), "selectorBytes", query)
		return nil, nil, nil
	}
	return live, leftOut, nil
}

// notOperatorsObjects selects the objects without the operator's
// managed-by label: never the deletion-signal work.
func notOperatorsObjects() client.MatchingLabelsSelector {
	req, _ := labels.NewRequirement(v1alpha1.ManagedByLabel, selection.NotEquals, []string{v1alpha1.ManagedBy})
	return client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}
}

// notNamed selects the objects of none of the names ("" names none).
func notNamed(names ...string) client.MatchingFieldsSelector {
	var terms []fields.Selector
	for _, name := range names {
		if name != "" {
			terms = append(terms, fields.OneTermNotEqualSelector("metadata.name", name))
		}
	}
	return client.MatchingFieldsSelector{Selector: fields.AndSelectors(terms...)}
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

// The admission policy that makes a deletecollection safe: in force, as
// the operator renders it, settled (see deleteCollection).

// AdmissionSettle is how long the admission policy that refuses new
// objects in a deleting cluster's namespace, and its binding, must have
// been as they are (created, or last written) before a group is deleted in
// one request: each API server loads them from a watch, so one written
// moments ago may not be enforced everywhere yet.
//
// It is a margin over the delay of a watch, not a proof: docs/developer/design.md,
// "One request for a group".
const AdmissionSettle = 5 * time.Second

// admissionInForce says why the admission policy that refuses new
// ManifestWorks and ManagedClusterAddOns in a deleting cluster's namespace
// is not known to be in force ("" when it is): it and its binding must
// exist, not be being deleted, equal what admissionpolicy.Objects makes
// (rules, match conditions, validations; the binding's policy, match
// resources and actions: an administrator's edit, even one that narrows
// them, means no collection), and not have been written for
// a.admissionSettle. In force, it returns the resourceVersions of both.
func (a *ClusterTeardown) admissionInForce(ctx context.Context) (why, versions string, err error) {
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
	if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(wantPolicy), &policy); err != nil {
		return "the policy cannot be read", "", client.IgnoreNotFound(err)
	}
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(wantBinding), &binding); err != nil {
		return "the binding cannot be read", "", client.IgnoreNotFound(err)
	}
	switch {
	case policy.DeletionTimestamp != nil || binding.DeletionTimestamp != nil:
		return "the policy or its binding is being deleted", "", nil
	case !equality.Semantic.DeepEqual(defaultedPolicy(policy.Spec), defaultedPolicy(wantPolicy.Spec)):
		return "the policy differs from the operator's", "", nil
	case !equality.Semantic.DeepEqual(defaultedBinding(binding.Spec), defaultedBinding(wantBinding.Spec)):
		return "the binding differs from the operator's", "", nil
	case time.Since(lastWritten(&policy)) < a.admissionSettle || time.Since(lastWritten(&binding)) < a.admissionSettle:
		return fmt.Sprintf("the policy or its binding was written less than %s ago", a.admissionSettle), "", nil
	}
	return "", policy.ResourceVersion + "," + binding.ResourceVersion, nil
}

// admissionProbe names the work a dry-run create asks the API server for.
const admissionProbe = "cleanup-operator-admission-probe"

// admissionRefuses says whether the API server refuses, by the operator's
// admission policy, a new ManifestWork in the namespace: a dry run, which
// writes nothing.
func (a *ClusterTeardown) admissionRefuses(ctx context.Context, namespace string) (bool, error) {
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
