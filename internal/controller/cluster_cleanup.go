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
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	workv1 "open-cluster-management.io/api/work/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// ForcedObjectsAnnotation counts, on a ManagedCluster being cleaned up, the
// objects whose work-agent finalizer the operator removed; it survives a
// restart so that the cleanup ends with reason Forced.
const ForcedObjectsAnnotation = "cleanup.fleetops.dev/forced-objects"

// ForcingAnnotation lists, on a ManagedCluster being cleaned up, the
// objects of the last batch the operator set out to force (resource/name),
// already counted in ForcedObjectsAnnotation.
const ForcingAnnotation = "cleanup.fleetops.dev/forcing"

// maxNamed bounds the objects a condition message names.
const maxNamed = 5

// cleanup is one reconcile of a cluster being deleted: what the policy
// decided for it and what the cluster namespace holds.
type cleanup struct {
	mc        *unstructured.Unstructured
	g         *decision.Governed
	strategy  v1alpha1.RemoveStrategyType
	deadline  time.Time
	now       time.Time
	available bool
	dryRun    bool
	namespace *corev1.Namespace // whole, as keepNamespace reads it; nil: no cluster namespace
	objects   map[schema.GroupVersionResource][]decision.Object
	// works are the cluster's ManifestWorks whole, by UID: their
	// manifests and status decide their orphaning.
	works map[types.UID]*workv1.ManifestWork
	// unserved are the resources listed that the API server does not serve.
	unserved map[schema.GroupVersionResource]bool
	plan     []string // dry run: what would happen, step by step
}

// step is where a cleanup stands after one phase.
type step struct {
	done    bool
	reason  string
	message string
	// event, when set, is emitted on the cluster with the step's reason.
	event string
	// action is the event's action. Events of one object with the same
	// reason and action fold into one series, so each stage and group of a
	// cleanup has its own.
	action  string
	requeue time.Duration
}

func (c *cleanup) pastDeadline() bool { return !c.now.Before(c.deadline) }

// mayForce says whether the work agent's finalizer may be removed now.
func (c *cleanup) mayForce() bool {
	switch c.strategy {
	case v1alpha1.RemoveStrategyBestEffort:
		return c.pastDeadline() || !c.available
	case v1alpha1.RemoveStrategyNeedless:
		return c.pastDeadline()
	}
	return false
}

// waiting is the step of a phase that waits for objects to go: at the
// deadline a requeue, after it CleanupFailed naming what remains.
func (c *cleanup) waiting(reason, message string, remaining []decision.Object) step {
	if c.pastDeadline() && !c.mayForce() {
		return step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason, message: fmt.Sprintf(
			"%s; the %s timeout passed and %d object(s) remain: %s", message, c.strategy,
			len(remaining), decision.Names(remaining, maxNamed))}
	}
	s := step{reason: reason, message: message}
	if !c.pastDeadline() {
		s.requeue = c.deadline.Sub(c.now)
	}
	return s
}

// reconcileDeletion removes the cluster's content in the declared order and
// then the finalizer. Each call recomputes where the cleanup stands from
// what exists, so a restart resumes it without repeating or skipping a step.
func (a *ManagedClusterAdapter) reconcileDeletion(ctx context.Context, mc *unstructured.Unstructured, g *decision.Governed) (reconcile.Result, error) {
	if a.inflight.finished(mc.GetUID()) {
		return reconcile.Result{}, nil // finished; the cache has not caught up yet
	}
	if g.Held != nil {
		return a.report(ctx, mc, step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason,
			message: "held, nothing is deleted: " + g.Held.Error()})
	}
	if g.Policy == nil {
		// No policy governs the cluster: the operator has no mandate.
		return reconcile.Result{}, a.releaseDeleting(ctx, mc, "no CleanupPolicy governs the cluster; its content is left as it is")
	}
	c, err := a.newCleanup(ctx, mc, g)
	if err != nil {
		var evalErr *celError
		var accessErr *accessError
		switch {
		case errors.As(err, &evalErr):
			return a.report(ctx, mc, step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason,
				message: "held, nothing is deleted: " + err.Error()})
		case errors.As(err, &accessErr):
			// Reported, and retried with backoff: a granted permission
			// brings no watch event.
			if _, rerr := a.report(ctx, mc, step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason,
				message: "held, nothing is deleted: " + err.Error()}); rerr != nil {
				return reconcile.Result{}, rerr
			}
		}
		return reconcile.Result{}, err
	}

	phases := []func(context.Context, *cleanup) (step, error){
		a.reconcileOrphaning,
		a.reconcileSignal,
		a.reconcileGate,
		a.reconcileStages,
		a.reconcileNamespace,
	}
	for _, phase := range phases {
		s, err := phase(ctx, c)
		if err != nil {
			var evalErr *celError
			if errors.As(err, &evalErr) {
				return a.report(ctx, mc, step{reason: v1alpha1.CleanupFailedReason, event: v1alpha1.CleanupFailedReason,
					message: "held, nothing more is deleted: " + err.Error()})
			}
			return reconcile.Result{}, err
		}
		if !s.done {
			return a.report(ctx, mc, s)
		}
	}
	if c.dryRun {
		return a.report(ctx, mc, step{reason: v1alpha1.DryRunReason, event: v1alpha1.DryRunReason,
			message: fmt.Sprintf("dry run, nothing is deleted (strategy %s): %s", c.strategy, strings.Join(c.plan, "; "))})
	}
	return reconcile.Result{}, a.finish(ctx, c)
}

// celError marks an expression that failed at run time during a cleanup.
type celError struct{ err error }

func (e *celError) Error() string { return e.err.Error() }
func (e *celError) Unwrap() error { return e.err }

func (a *ManagedClusterAdapter) newCleanup(ctx context.Context, mc *unstructured.Unstructured, g *decision.Governed) (*cleanup, error) {
	p := g.Policy
	strategy, err := decision.Strategy(p, g.Activation)
	if err != nil {
		return nil, &celError{err}
	}
	c := &cleanup{
		mc: mc, g: g, strategy: strategy, now: time.Now(),
		deadline:  mc.GetDeletionTimestamp().Add(decision.Timeout(p)),
		available: clusterAvailable(mc),
		dryRun:    p.Spec.DryRun,
		objects:   map[schema.GroupVersionResource][]decision.Object{},
	}
	ns := &corev1.Namespace{}
	switch err := a.Client.Get(ctx, client.ObjectKey{Name: mc.GetName()}, ns); {
	case err == nil:
		c.namespace = ns
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	if c.namespace == nil {
		return c, nil
	}
	// The works are listed whole, once: their metadata for the stages,
	// their manifests and status for their orphaning.
	var works workv1.ManifestWorkList
	if err := a.Client.List(ctx, &works, client.InNamespace(mc.GetName())); err != nil {
		return nil, fmt.Errorf("listing ManifestWorks: %w", err)
	}
	c.works = make(map[types.UID]*workv1.ManifestWork, len(works.Items))
	metas := make([]metav1.PartialObjectMetadata, len(works.Items))
	for i := range works.Items {
		c.works[works.Items[i].UID] = &works.Items[i]
		metas[i].SetGroupVersionKind(manifestWorkGVK)
		metas[i].ObjectMeta = works.Items[i].ObjectMeta
	}
	if c.objects[decision.ManifestWorks], err = policyObjects(decision.ManifestWorks, metas); err != nil {
		return nil, err
	}
	for _, gvr := range decision.Resources(p) {
		if _, done := c.objects[gvr]; done {
			continue
		}
		items, err := a.listServed(ctx, c, gvr)
		if err != nil {
			return nil, err
		}
		if c.objects[gvr], err = policyObjects(gvr, items); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// policyObjects is what the decisions see of listed objects: their
// metadata, and the metadata as CEL's `object`.
func policyObjects(gvr schema.GroupVersionResource, items []metav1.PartialObjectMetadata) ([]decision.Object, error) {
	objs := make([]decision.Object, 0, len(items))
	for i := range items {
		value, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&items[i])
		if err != nil {
			return nil, err
		}
		objs = append(objs, decision.Object{GVR: gvr, Meta: &items[i], Value: value})
	}
	return objs, nil
}

// reconcileSignal labels the cluster namespace and deletes the
// deletion-signal work, then waits until the work agent has removed it.
func (a *ManagedClusterAdapter) reconcileSignal(ctx context.Context, c *cleanup) (step, error) {
	name := decision.SignalWorkName(c.g.Policy)
	var work *decision.Object
	for i, w := range c.objects[decision.ManifestWorks] {
		if name != "" && w.Meta.Name == name {
			work = &c.objects[decision.ManifestWorks][i]
		}
	}
	notOwned, err := a.notOwnedSignal(ctx, c, work)
	if err != nil {
		return step{}, err
	}
	if c.dryRun {
		msg := fmt.Sprintf("would label namespace %s %s=true", c.mc.GetName(), v1alpha1.ClusterDeletingLabel)
		if notOwned != nil {
			msg += "; would hold: " + notOwned.message
		} else if work != nil {
			msg += fmt.Sprintf(" and delete the deletion-signal work %s", name)
		}
		c.plan = append(c.plan, msg)
		return step{done: true}, nil
	}
	if c.namespace != nil && c.namespace.DeletionTimestamp == nil && c.namespace.Labels[v1alpha1.ClusterDeletingLabel] != "true" {
		before := c.namespace.DeepCopy()
		if c.namespace.Labels == nil {
			c.namespace.Labels = map[string]string{}
		}
		c.namespace.Labels[v1alpha1.ClusterDeletingLabel] = "true"
		if err := a.Client.Patch(ctx, c.namespace, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return step{}, err
		}
	}
	if work == nil {
		return step{done: true}, nil
	}
	if notOwned != nil {
		return *notOwned, nil
	}
	deleted, err := a.deleteObjects(ctx, c, []decision.Object{*work})
	if err != nil {
		return step{}, err
	}
	forced, err := a.force(ctx, c, []decision.Object{*work})
	if err != nil {
		return step{}, err
	}
	msg := fmt.Sprintf("waiting for the deletion-signal work %s to be removed from the managed cluster", name)
	if forced > 0 {
		msg = fmt.Sprintf("removed the work agent's finalizer from the deletion-signal work %s", name)
	}
	s := c.waiting(v1alpha1.SignallingReason, msg, []decision.Object{*work})
	if deleted > 0 {
		s.event = v1alpha1.SignallingReason
	}
	return s, nil
}

// reconcileGate waits until no monitored object remains. It deletes none.
func (a *ManagedClusterAdapter) reconcileGate(_ context.Context, c *cleanup) (step, error) {
	if s, held := c.gateUnserved(); held && !s.done {
		return s, nil
	}
	holding, err := decision.Gate(c.g.Policy, c.g.Activation, c.objects)
	if err != nil {
		return step{}, &celError{err}
	}
	if len(holding) == 0 {
		return step{done: true}, nil
	}
	msg := fmt.Sprintf("waiting for %d monitored object(s) to be removed by their controllers: %s",
		len(holding), decision.Names(holding, maxNamed))
	if c.dryRun {
		c.plan = append(c.plan, "would wait: "+msg)
		return step{done: true}, nil
	}
	s := c.waiting(v1alpha1.WaitingForMonitoredResourcesReason, msg, holding)
	if s.reason == v1alpha1.WaitingForMonitoredResourcesReason {
		s.event = s.reason
	}
	return s, nil
}

// reconcileStages deletes the first stage that still holds objects, lowest
// cleanup-priority first, and waits until they are gone.
func (a *ManagedClusterAdapter) reconcileStages(ctx context.Context, c *cleanup) (step, error) {
	signal := decision.SignalWorkName(c.g.Policy)
	stages := decision.Stages(c.g.Policy)
	assigned, err := decision.AssignStages(c.g.Policy, c.g.Activation, stages, c.objects, func(o decision.Object) bool {
		return o.GVR == decision.ManifestWorks && signal != "" && o.Meta.Name == signal
	})
	if err != nil {
		return step{}, &celError{err}
	}
	for i, objs := range assigned {
		if s, held := c.stageUnserved(i, len(stages), stages[i]); held && !s.done {
			return s, nil
		}
		if len(objs) == 0 {
			continue
		}
		stage := stages[i]
		group := decision.FirstGroup(objs)
		if c.dryRun {
			c.plan = append(c.plan, fmt.Sprintf("stage %s would delete %d %s: %s",
				stage.Name, len(objs), stage.GVR.Resource, decision.Names(objs, maxNamed)))
			continue
		}
		deleted, err := a.deleteObjects(ctx, c, group)
		if err != nil {
			return step{}, err
		}
		forced, err := a.force(ctx, c, group)
		if err != nil {
			return step{}, err
		}
		where := fmt.Sprintf("stage %s (%d of %d)", stage.Name, i+1, len(stages))
		if deleted > 0 {
			return step{reason: v1alpha1.DeletingStageReason, event: v1alpha1.DeletingStageReason,
				action: fmt.Sprintf("Delete/%s/%s", stage.Name, decision.PriorityName(group[0].Meta)), message: fmt.Sprintf(
					"%s: deleting %d %s with cleanup-priority %s: %s; %d remain in the stage",
					where, deleted, stage.GVR.Resource, decision.PriorityName(group[0].Meta), decision.Names(group, maxNamed), len(objs)),
				requeue: c.deadline.Sub(c.now)}, nil
		}
		// The group deleted first is what the stage waits for; the rest
		// of the stage is not deleted before it is gone.
		msg := fmt.Sprintf("%s: %d %s remain; waiting for the finalizers of those being deleted: %s",
			where, len(objs), stage.GVR.Resource, decision.Names(group, maxNamed))
		if forced > 0 {
			msg = fmt.Sprintf("%s: removed the work agent's finalizer from %d of the %d object(s) in the stage", where, forced, len(objs))
		}
		return c.waiting(v1alpha1.ResourcesRemainingReason, msg, objs), nil
	}
	return step{done: true}, nil
}

// eventAction bounds an event action to the 128 characters the API accepts.
func eventAction(a string) string {
	if len(a) > 128 {
		return a[:128]
	}
	return a
}

// reconcileNamespace deletes the cluster namespace unless the policy keeps
// it, and moves on: its termination is the namespace controller's.
func (a *ManagedClusterAdapter) reconcileNamespace(ctx context.Context, c *cleanup) (step, error) {
	ns := c.namespace
	if ns == nil {
		return step{done: true}, nil
	}
	if ns.Name != c.mc.GetName() {
		// Never delete a namespace that is not the cluster's.
		return step{}, fmt.Errorf("refusing to delete namespace %s for cluster %s", ns.Name, c.mc.GetName())
	}
	value, err := namespaceValue(ns)
	if err != nil {
		return step{}, err
	}
	keep, err := decision.KeepNamespace(c.g.Policy, c.g.Activation, value)
	if err != nil {
		return step{}, &celError{err}
	}
	if c.dryRun {
		if keep {
			c.plan = append(c.plan, fmt.Sprintf("would keep namespace %s", ns.Name))
		} else {
			c.plan = append(c.plan, fmt.Sprintf("would delete namespace %s", ns.Name))
		}
		return step{done: true}, nil
	}
	if keep {
		return step{done: true}, a.unlabel(ctx, ns)
	}
	if ns.DeletionTimestamp == nil {
		if err := a.Client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
			return step{}, err
		}
		a.Recorder.Eventf(c.mc, nil, corev1.EventTypeNormal, "DeletingNamespace", "Cleanup", "deleted namespace %s", ns.Name)
	}
	return step{done: true}, nil
}

// namespaceValue is the namespace as keepNamespace reads it: whole, with
// its kind, as the preview reads it too.
func namespaceValue(ns *corev1.Namespace) (map[string]any, error) {
	value, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns)
	if err != nil {
		return nil, err
	}
	value["apiVersion"], value["kind"] = "v1", "Namespace"
	return value, nil
}

// finish reports the outcome and removes the finalizer.
func (a *ManagedClusterAdapter) finish(ctx context.Context, c *cleanup) error {
	reason, msg := v1alpha1.CompletedReason, "the cluster's content was removed as declared"
	if n := c.mc.GetAnnotations()[ForcedObjectsAnnotation]; n != "" {
		reason, msg = v1alpha1.ForcedReason, fmt.Sprintf("the hub side was cleaned; the work agent's finalizer was removed from %s object(s)", n)
	} else if c.strategy == v1alpha1.RemoveStrategyNeedless {
		reason, msg = v1alpha1.OrphanedReason, "the hub side was removed; everything on the managed cluster was left in place"
	}
	if u := unconfirmedOrphans(c.mc); u.Len() > 0 {
		msg += fmt.Sprintf("; %d ManifestWork(s) were deleted with an orphan not confirmed by the agent: %s",
			u.Len(), strings.Join(bounded(sets.List(u)), ", "))
	}
	if _, err := a.report(ctx, c.mc, step{done: true, reason: reason, message: msg}); err != nil {
		return err
	}
	a.Metrics.observeDone(c.mc.GetName(), reason, time.Since(c.mc.GetDeletionTimestamp().Time))
	return a.removeFinalizer(ctx, c.mc, reason, msg)
}

func (a *ManagedClusterAdapter) removeFinalizer(ctx context.Context, mc *unstructured.Unstructured, reason, msg string) error {
	// A JSON patch that tests the finalizer's position removes exactly it,
	// whatever else changed on the cluster meanwhile (its status does, often).
	patch, ok := removeFinalizerPatch(mc, v1alpha1.ClusterCleanupFinalizer)
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
	a.Metrics.forget(mc.GetName())
	a.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, reason, "Cleanup", "%s", msg)
	logf.FromContext(ctx).Info("cluster cleanup finished", "cluster", mc.GetName(), "reason", reason)
	return nil
}

// report writes ContentDeleteSuccess when it changed, emits the step's
// event, and requeues at the deadline when the step waits for one.
func (a *ManagedClusterAdapter) report(ctx context.Context, mc *unstructured.Unstructured, s step) (reconcile.Result, error) {
	status := metav1.ConditionFalse
	if s.done {
		status = metav1.ConditionTrue
	}
	// The event first: the step it reports has happened even if the
	// condition write below meets a newer cluster and has to wait.
	if s.event != "" {
		typ := corev1.EventTypeNormal
		if s.reason == v1alpha1.CleanupFailedReason {
			typ = corev1.EventTypeWarning
		}
		a.Recorder.Eventf(mc, nil, typ, s.event, cmp.Or(s.action, "Cleanup"), "%s", s.message)
	}
	if err := a.writeCondition(ctx, mc, status, s); err != nil {
		if apierrors.IsConflict(err) && !s.done {
			// Another writer (OCM's registration controllers) changed the
			// cluster meanwhile; its event brings the cluster back.
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !s.done {
		a.Metrics.observeStep(mc.GetName(), s.reason)
	}
	return reconcile.Result{RequeueAfter: max(s.requeue, 0)}, nil
}

// writeCondition writes ContentDeleteSuccess when it changed, on the
// cluster as read: a cluster changed meanwhile is a conflict. The outcome
// (a done step) must be written before the finalizer goes, so its conflict
// is an error, retried.
func (a *ManagedClusterAdapter) writeCondition(ctx context.Context, mc *unstructured.Unstructured, status metav1.ConditionStatus, s step) error {
	before := mc.DeepCopy()
	if !setContentDeleteCondition(mc, status, s.reason, s.message) {
		return nil
	}
	if err := a.Client.Status().Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	logf.FromContext(ctx).Info("cluster cleanup step", "cluster", mc.GetName(), "reason", s.reason, "message", s.message)
	return nil
}

// deleteParallelism bounds the deletes one cluster has in flight at once.
const deleteParallelism = 8

// deleteObjects deletes the objects that are not being deleted yet, once
// each: an object already deleted by this process is not deleted again
// while the cache catches up. A work is deleted only at the version whose
// orphaning was checked: a work changed meanwhile is checked again first.
func (a *ManagedClusterAdapter) deleteObjects(ctx context.Context, c *cleanup, objs []decision.Object) (int, error) {
	var n atomic.Int64
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(deleteParallelism)
	for _, o := range objs {
		if o.Meta.DeletionTimestamp != nil || a.inflight.has(deleted, o.Meta.UID) {
			continue
		}
		eg.Go(func() error {
			// Through the unstructured client: the metadata client cannot
			// decode the object a DELETE returns while finalizers hold it.
			target := &unstructured.Unstructured{}
			target.SetGroupVersionKind(o.Meta.GroupVersionKind())
			target.SetNamespace(o.Meta.Namespace)
			target.SetName(o.Meta.Name)
			pre := client.Preconditions{UID: &o.Meta.UID}
			if w := c.works[o.Meta.UID]; w != nil {
				pre.ResourceVersion = &w.ResourceVersion
			}
			err := a.Client.Delete(ctx, target, pre)
			switch {
			case apierrors.IsConflict(err):
				return nil // replaced or changed meanwhile: the watch brings it
			case client.IgnoreNotFound(err) != nil:
				return fmt.Errorf("deleting %s in %s: %w", o.Key(), o.Meta.Namespace, err)
			}
			a.inflight.add(deleted, o.Meta.Namespace, o.Meta.UID)
			a.Metrics.DeletedObjects.WithLabelValues(o.GVR.Resource).Inc()
			n.Add(1)
			return nil
		})
	}
	err := eg.Wait()
	return int(n.Load()), err
}

// force removes the work agent's finalizer from deleting objects, where the
// strategy allows it now, and records every forced object.
func (a *ManagedClusterAdapter) force(ctx context.Context, c *cleanup, objs []decision.Object) (int, error) {
	if !c.mayForce() {
		return 0, nil
	}
	var todo []decision.Object
	for _, o := range objs {
		_, has := removeFinalizerPatch(o.Meta, v1alpha1.WorkAgentFinalizer)
		if o.Meta.DeletionTimestamp != nil && has && !a.inflight.has(forcedSet, o.Meta.UID) {
			todo = append(todo, o)
		}
	}
	if len(todo) == 0 {
		return 0, nil
	}
	if err := a.recordForcing(ctx, c, todo); err != nil {
		return 0, err
	}
	var forced []string
	for _, o := range todo {
		patch, _ := removeFinalizerPatch(o.Meta, v1alpha1.WorkAgentFinalizer)
		if err := a.Client.Patch(ctx, o.Meta, patch); client.IgnoreNotFound(err) != nil {
			if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
				continue // the finalizers changed meanwhile: the watch brings the object back
			}
			return len(forced), fmt.Errorf("removing the work agent's finalizer from %s: %w", o.Key(), err)
		}
		a.inflight.add(forcedSet, c.mc.GetName(), o.Meta.UID)
		a.Metrics.ForcedObjects.WithLabelValues(o.GVR.Resource).Inc()
		forced = append(forced, o.Key())
	}
	if len(forced) == 0 {
		return 0, nil
	}
	why := "the cluster is unavailable"
	if c.pastDeadline() {
		why = "the timeout passed"
	}
	a.Recorder.Eventf(c.mc, nil, corev1.EventTypeWarning, v1alpha1.ForcedReason, eventAction("Force/"+forced[0]),
		"%s (%s): removed the work agent's finalizer from %s", c.strategy, why, strings.Join(forced, ", "))
	return len(forced), nil
}

// recordForcing writes, before any finalizer is removed, the count of
// forced objects and the batch about to be forced, so that a cleanup never
// ends as Completed after a crash or a failed write, and an object of a
// batch cut short is not counted twice when the next one forces it. It
// writes on the cluster as read, so no record written meanwhile is lost.
func (a *ManagedClusterAdapter) recordForcing(ctx context.Context, c *cleanup, batch []decision.Object) error {
	counted := sets.New[string]()
	if v := c.mc.GetAnnotations()[ForcingAnnotation]; v != "" {
		counted.Insert(strings.Split(v, ",")...)
	}
	total, _ := strconv.Atoi(c.mc.GetAnnotations()[ForcedObjectsAnnotation])
	keys := make([]string, len(batch))
	for i, o := range batch {
		keys[i] = o.Key()
		if !counted.Has(keys[i]) {
			total++
		}
	}
	before := c.mc.DeepCopy()
	setAnnotation(c.mc, ForcedObjectsAnnotation, strconv.Itoa(total))
	setAnnotation(c.mc, ForcingAnnotation, strings.Join(keys, ","))
	if err := a.Client.Patch(ctx, c.mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the forced objects of %s: %w", c.mc.GetName(), err)
	}
	return nil
}

// removeFinalizerPatch is a JSON patch removing one finalizer, valid only
// while the finalizer is still where obj has it.
func removeFinalizerPatch(obj metav1.Object, finalizer string) (client.Patch, bool) {
	i := slices.Index(obj.GetFinalizers(), finalizer)
	if i < 0 {
		return nil, false
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`,
		i, finalizer, i)
	return client.RawPatch(types.JSONPatchType, []byte(patch)), true
}

// inflight remembers, per object UID, what this process already did, so
// that a cache that has not caught up yet does not cause the same write
// twice. It is memory only: after a restart the cache shows the effects.
type inflight struct {
	mu        sync.Mutex
	sets      map[inflightKind]sets.Set[types.UID]
	byCluster map[string]sets.Set[types.UID]
	// done are clusters whose finalizer this process removed.
	done sets.Set[types.UID]
	// stamps are the generations of works this process gave deleteOption
	// Orphan, so that a cache that has not caught up with the stamp is not
	// taken for a work the agent applied it to.
	stamps map[types.UID]int64
	// stampCount counts those stamps per work, to stop a write war.
	stampCount map[types.UID]int
}

func (f *inflight) stamp(cluster string, uid types.UID, generation int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stamps[uid] = generation
	f.stampCount[uid]++
	if f.byCluster[cluster] == nil {
		f.byCluster[cluster] = sets.New[types.UID]()
	}
	f.byCluster[cluster].Insert(uid)
}

// restamps counts the stamps this process wrote on a work beyond the first:
// another manager reverted them.
func (f *inflight) restamps(uid types.UID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(f.stampCount[uid]-1, 0)
}

func (f *inflight) stamped(uid types.UID) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stamps[uid]
}

func (f *inflight) forgetStamp(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.stamps, uid)
	delete(f.stampCount, uid)
}

// maxFinished bounds the finished clusters remembered; the cache has long
// caught up with the oldest of them.
const maxFinished = 10000

func (f *inflight) finish(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done.Len() >= maxFinished {
		f.done = sets.New[types.UID]()
	}
	f.done.Insert(uid)
}

func (f *inflight) finished(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done.Has(uid)
}

type inflightKind int

const (
	deleted inflightKind = iota
	orphaned
	forcedSet
)

func newInflight() *inflight {
	return &inflight{
		sets:       map[inflightKind]sets.Set[types.UID]{deleted: {}, orphaned: {}, forcedSet: {}},
		byCluster:  map[string]sets.Set[types.UID]{},
		done:       sets.New[types.UID](),
		stamps:     map[types.UID]int64{},
		stampCount: map[types.UID]int{},
	}
}

func (f *inflight) has(k inflightKind, uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sets[k].Has(uid)
}

func (f *inflight) add(k inflightKind, cluster string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[k].Insert(uid)
	if f.byCluster[cluster] == nil {
		f.byCluster[cluster] = sets.New[types.UID]()
	}
	f.byCluster[cluster].Insert(uid)
}

// forgetCluster drops what was remembered for a cluster whose cleanup ended.
func (f *inflight) forgetCluster(cluster string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid := range f.byCluster[cluster] {
		for _, s := range f.sets {
			s.Delete(uid)
		}
		delete(f.stamps, uid)
		delete(f.stampCount, uid)
	}
	delete(f.byCluster, cluster)
}
