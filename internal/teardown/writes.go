package teardown

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/tally"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
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
