package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// maxReported bounds the clusters and errors a status or event names.
const maxReported = 3

// budgetPause is how soon a policy whose evaluation spent its CEL cost
// budget goes on with the clusters it did not reach.
const budgetPause = time.Second

// CleanupPolicyReconciler compiles each CleanupPolicy, evaluates its
// selector against the fleet and reports what it matches and governs, and
// where it overlaps another policy.
type CleanupPolicyReconciler struct {
	client.Client
	Cache      *cel.Cache
	Governance *decision.Governance
	Recorder   events.EventRecorder
	Tally      *Tally
	// Optional says which optional kinds are off; the Ready message names them.
	Optional *Optional
	// Mapper says which resources the API server serves.
	Mapper meta.RESTMapper
}

// +kubebuilder:rbac:groups=cleanup.fleetops.dev,resources=cleanuppolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=cleanup.fleetops.dev,resources=cleanuppolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile compiles the policy and evaluates it against every ManagedCluster.
func (r *CleanupPolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	u := newCleanupPolicy()
	if err := r.Get(ctx, req.NamespacedName, u); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.forgetDeleted(ctx)
		}
		return reconcile.Result{}, err
	}
	teardowns, err := r.reconcileInUse(ctx, u)
	if err != nil {
		return reconcile.Result{}, err
	}
	// A policy stored with a field the operator cannot decode is reported
	// as one that does not compile: it has its metadata and status only.
	p, decodeErrs := snapshot.DecodePolicy(u)
	orig := p.DeepCopy()
	defer func() {
		retErr = errors.Join(retErr, r.patchStatus(ctx, orig, p))
	}()
	if p.DeletionTimestamp != nil {
		// A policy being deleted governs nothing new; it only waits for
		// the teardowns it governs.
		r.reportTerminating(p, teardowns)
		return reconcile.Result{}, nil
	}

	compiled, errs := r.Cache.Load(p.UID, p.Generation, func() (*v1alpha1.CleanupPolicy, field.ErrorList) { return p, decodeErrs })
	if len(errs) > 0 {
		p.Status.ObservedGeneration = p.Generation
		setInvalidCondition(p, errs)
		if !equality.Semantic.DeepEqual(orig.Status.Conditions, p.Status.Conditions) {
			reason := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.StalledCondition).Reason
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, reason, "Compile", "%s", errs.ToAggregate().Error())
			logf.FromContext(ctx).Info("policy invalid: it governs nothing new and the clusters it governs are held",
				"policy", p.Name, "generation", p.Generation, "reason", reason, "error", errs.ToAggregate().Error())
		}
		// Terminal: only a new generation can fix it.
		return reconcile.Result{}, reconcile.TerminalError(errs.ToAggregate())
	}
	result, err = r.reconcileFleet(ctx, p, compiled)
	if err == nil {
		// Only once the status describes this generation: after an error
		// worth a retry it still describes the one before.
		p.Status.ObservedGeneration = p.Generation
	}
	return result, err
}

// reconcileFleet evaluates every valid policy's selector on every cluster and
// reports this policy's share: what it matches, governs, and shares.
func (r *CleanupPolicyReconciler) reconcileFleet(ctx context.Context, p *v1alpha1.CleanupPolicy, compiled *cel.Policy) (reconcile.Result, error) {
	policies, err := snapshot.CompileAll(ctx, r, r.Cache)
	if err != nil {
		return reconcile.Result{}, err
	}
	ranked := policies.Ranked
	unserved, err := policyUnserved(r.Mapper, compiled)
	if err != nil {
		return reconcile.Result{}, err
	}
	clusters := newManagedClusterList()
	if err := r.List(ctx, clusters); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	// In name order, so that the examples a status names do not change
	// from one reconcile to the next.
	slices.SortFunc(clusters.Items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })

	budget := cel.NewBudget(cel.ReconcileCostBudget)
	prev := p.Status.DeepCopy()
	governedNames := sets.New[string]()
	var (
		evaluated            int
		matched, governed    int32
		deleting, ocmCleanup int32
		ocmExamples          []string
		evalErrors           []string
		overlaps             = map[string]*v1alpha1.PolicyOverlap{}
		exhausted            bool
	)
	for i := range clusters.Items {
		c := &clusters.Items[i]
		res := r.Governance.Select(ctx, budget, ranked, c)
		if err, failed := errorOf(res, compiled); failed {
			if cel.Transient(err) {
				exhausted = true
				break
			}
			evaluated++
			evalErrors = append(evalErrors, fmt.Sprintf("%s: %v", c.GetName(), err))
			continue
		}
		evaluated++
		if !slices.ContainsFunc(res.Matched, samePolicy(compiled)) {
			continue
		}
		matched++
		if res.Governor != nil && res.Governor.UID == compiled.UID {
			governed++
			governedNames.Insert(c.GetName())
			if c.GetDeletionTimestamp() != nil {
				deleting++
			}
			if slices.Contains(c.GetFinalizers(), v1alpha1.OCMResourceCleanupFinalizer) {
				ocmCleanup++
				if len(ocmExamples) < maxReported {
					ocmExamples = append(ocmExamples, c.GetName())
				}
			}
		}
		for _, other := range res.Matched {
			if other.UID == compiled.UID || other.Spec.Priority != compiled.Spec.Priority {
				continue
			}
			o := overlaps[other.Name]
			if o == nil {
				o = &v1alpha1.PolicyOverlap{Policy: other.Name, GovernedBy: min(other.Name, compiled.Name)}
				overlaps[other.Name] = o
			}
			o.Clusters++
			if len(o.Examples) < maxReported {
				o.Examples = append(o.Examples, c.GetName())
			}
		}
	}

	p.Status.MatchedClusters = matched
	p.Status.GovernedClusters = governed
	p.Status.EvaluationErrors = int32(len(evalErrors))
	p.Status.ClustersDeleting = deleting
	standalone := len(ranked) > 0 && standaloneGovernor(ranked) == compiled
	if err := r.countStamped(ctx, p, clusters, governedNames, standalone); err != nil {
		return reconcile.Result{}, err
	}
	p.Status.OCMResourceCleanupClusters = ocmCleanup
	if ocmCleanup > 0 && ocmCleanup != prev.OCMResourceCleanupClusters {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "OCMResourceCleanupEnabled", "Evaluate",
			"%d governed cluster(s) also carry OCM's %s finalizer (%s): OCM deletes their add-ons and works without this "+
				"policy's gates and order; disable the ResourceCleanup feature gate of the registration hub",
			ocmCleanup, v1alpha1.OCMResourceCleanupFinalizer, strings.Join(ocmExamples, ", "))
	}
	p.Status.Overlaps = sortedOverlaps(overlaps)
	if !equality.Semantic.DeepEqual(prev.Overlaps, p.Status.Overlaps) {
		r.reportOverlaps(p)
	}

	switch {
	case exhausted:
		setReconcilingCondition(p, v1alpha1.BudgetExhaustedReason, fmt.Sprintf(
			"evaluated %d of %d clusters before the CEL cost budget ran out; continuing", evaluated, len(clusters.Items)))
		logf.FromContext(ctx).Info("CEL cost budget exhausted, requeueing", "policy", p.Name)
		return reconcile.Result{RequeueAfter: budgetPause}, nil
	case len(unserved) > 0:
		// Not terminal: a CRD installed later serves the resource, and its
		// events bring the policy back.
		if msg := setNotServedCondition(p, unserved); readyMessage(prev) != msg {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.ResourceNotServedReason, "Evaluate", "%s", msg)
		}
	case len(evalErrors) > 0:
		msg := fmt.Sprintf("the selector failed on %d cluster(s), which are held: %s",
			len(evalErrors), strings.Join(evalErrors[:min(len(evalErrors), maxReported)], "; "))
		setStalledCondition(p, v1alpha1.EvaluationErrorReason, msg)
		if prev.EvaluationErrors != p.Status.EvaluationErrors || readyMessage(prev) != msg {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.EvaluationErrorReason, "Evaluate", "%s", msg)
		}
	default:
		msg := fmt.Sprintf("matches %d cluster(s) and governs %d", matched, governed)
		if ocmCleanup > 0 {
			msg += fmt.Sprintf("; %d of them also carry OCM's %s finalizer: disable OCM's ResourceCleanup feature gate",
				ocmCleanup, v1alpha1.OCMResourceCleanupFinalizer)
		}
		msg += r.Optional.offMessage()
		if n := p.Status.NotOwned; n > 0 {
			msg += fmt.Sprintf("; %d object(s) that the operator did not create hold a step (no %s: %s label): %s",
				n, v1alpha1.ManagedByLabel, v1alpha1.ManagedBy, strings.Join(r.Tally.examples(notOwnedMark, p.Name, maxReported), ", "))
		}
		setReadyCondition(p, metav1.ConditionTrue, v1alpha1.SucceededReason, msg)
	}
	r.forgetClusters(clusters)
	return reconcile.Result{}, nil
}

// countStamped counts the objects carrying this policy's decisions, and
// those it could not write.
func (r *CleanupPolicyReconciler) countStamped(ctx context.Context, p *v1alpha1.CleanupPolicy, clusters *unstructured.UnstructuredList,
	governed sets.Set[string], standalone bool) error {
	isCluster := sets.New[string]()
	for i := range clusters.Items {
		isCluster.Insert(clusters.Items[i].GetName())
	}
	count := func(gvk schema.GroupVersionKind, annotation string, standaloneToo bool) (int32, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// Read-only: no copy of the cache.
		if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			if meta.IsNoMatchError(err) {
				return 0, nil
			}
			return 0, err
		}
		var n int32
		for i := range list.Items {
			o := &list.Items[i]
			ns := o.GetNamespace()
			if o.GetAnnotations()[annotation] != "" && (governed.Has(ns) || (standaloneToo && !isCluster.Has(ns))) {
				n++
			}
		}
		return n, nil
	}
	var works workv1.ManifestWorkList
	if err := r.List(ctx, &works, client.UnsafeDisableDeepCopy); client.IgnoreNotFound(err) != nil && !meta.IsNoMatchError(err) {
		return err
	}
	p.Status.WorksStamped = 0
	for i := range works.Items {
		if w := &works.Items[i]; w.Annotations[v1alpha1.OrphaningAnnotation] != "" && governed.Has(w.Namespace) {
			p.Status.WorksStamped++
		}
	}
	// Read from the cache only while the kind is served: a read of a kind
	// whose CRD is gone would wait for an informer that never syncs.
	p.Status.PoliciesStamped = 0
	if err := r.Optional.whileOn(ConfigurationPolicyCRD, func() (err error) {
		p.Status.PoliciesStamped, err = count(configurationPolicyGVK, v1alpha1.PruneAnnotation, standalone)
		return err
	}); err != nil {
		return err
	}
	p.Status.Conflicts = r.Tally.count(conflictMark, p.Name)
	p.Status.Contested = r.Tally.count(contestedMark, p.Name)
	p.Status.TemplatesNotReadingDecisions = r.Tally.count(unreadMark, p.Name)
	p.Status.DryRunPending = r.Tally.count(dryRunMark, p.Name)
	p.Status.NotOwned = r.Tally.count(notOwnedMark, p.Name)
	return nil
}

// standaloneGovernor is the policy that governs objects in namespaces that
// name no ManagedCluster: the first ranked with no selector.
func standaloneGovernor(ranked []*cel.Policy) *cel.Policy {
	for _, p := range ranked {
		if p.ClusterSelector == nil {
			return p
		}
	}
	return nil
}

// forgetClusters drops the remembered results of clusters that are gone.
func (r *CleanupPolicyReconciler) forgetClusters(clusters *unstructured.UnstructuredList) {
	live := sets.New[types.UID]()
	for i := range clusters.Items {
		live.Insert(clusters.Items[i].GetUID())
	}
	r.Governance.Forget(func(_ types.UID, _ int64, c types.UID) bool { return live.Has(c) })
}

func readyMessage(s *v1alpha1.CleanupPolicyStatus) string {
	for _, c := range s.Conditions {
		if c.Type == v1alpha1.ReadyCondition {
			return c.Message
		}
	}
	return ""
}

// forgetDeleted drops the compiled programs and remembered results of
// policies and clusters that are gone.
func (r *CleanupPolicyReconciler) forgetDeleted(ctx context.Context) error {
	items, err := snapshot.ListPolicies(ctx, r, client.UnsafeDisableDeepCopy)
	if err != nil {
		return err
	}
	live := sets.New[types.UID]()
	for i := range items {
		live.Insert(items[i].GetUID())
	}
	r.Cache.Retain(live)
	r.Governance.Forget(func(p types.UID, _ int64, _ types.UID) bool { return live.Has(p) })
	return nil
}

func (r *CleanupPolicyReconciler) patchStatus(ctx context.Context, orig, p *v1alpha1.CleanupPolicy) error {
	if equality.Semantic.DeepEqual(orig.Status, p.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, p, client.MergeFrom(orig)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching the status of CleanupPolicy %s: %w", p.Name, err)
	}
	return nil
}

// reportOverlaps emits an Event when the policies sharing clusters change.
func (r *CleanupPolicyReconciler) reportOverlaps(p *v1alpha1.CleanupPolicy) {
	if len(p.Status.Overlaps) == 0 {
		return
	}
	var parts []string
	for _, o := range p.Status.Overlaps {
		parts = append(parts, fmt.Sprintf("%s on %d cluster(s), governed by %s", o.Policy, o.Clusters, o.GovernedBy))
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "Overlap", "Evaluate",
		"selects clusters that other policies of priority %d select too: %s", p.Spec.Priority, strings.Join(parts, "; "))
}

func errorOf(res decision.Selection, p *cel.Policy) (error, bool) {
	for q, err := range res.Errors {
		if q.UID == p.UID {
			return err, true
		}
	}
	return nil, false
}

func samePolicy(p *cel.Policy) func(*cel.Policy) bool {
	return func(q *cel.Policy) bool { return q.UID == p.UID }
}

func sortedOverlaps(m map[string]*v1alpha1.PolicyOverlap) []v1alpha1.PolicyOverlap {
	out := make([]v1alpha1.PolicyOverlap, 0, len(m))
	for _, o := range m {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b v1alpha1.PolicyOverlap) int { return strings.Compare(a.Policy, b.Policy) })
	if len(out) > 16 {
		out = out[:16]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// SetupWithManager watches CleanupPolicies, and ManagedClusters, whose
// changes can change what every policy matches.
func (r *CleanupPolicyReconciler) SetupWithManager(mgr manager.Manager) error {
	allPolicies := handler.EnqueueRequestsFromMapFunc(r.allPolicies)
	b := builder.ControllerManagedBy(mgr).
		Named("cleanuppolicy").
		For(newCleanupPolicy(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Another policy's change can change this one's overlaps.
		Watches(newCleanupPolicy(), allPolicies, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(newManagedCluster(), allPolicies).
		// A CRD installed or removed can serve a resource a policy names.
		Watches(crdMetadata(), allPolicies).
		WatchesRawSource(r.Tally.source())
	if r.Optional != nil {
		// An optional kind turned on or off changes every Ready message.
		b = b.WatchesRawSource(r.Optional.source(allPolicies))
	}
	return b.
		WithOptions(ctrl.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

func (r *CleanupPolicyReconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	items, err := snapshot.ListPolicies(ctx, r, client.UnsafeDisableDeepCopy)
	if err != nil {
		logf.FromContext(ctx).Error(err, "listing CleanupPolicies")
		return nil
	}
	reqs := make([]reconcile.Request, len(items))
	for i := range items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: items[i].GetName()}}
	}
	return reqs
}
