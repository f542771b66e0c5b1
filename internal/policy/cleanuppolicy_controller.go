package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"
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
	Tally      *tally.Tally
	// Optional says which optional kinds are off; the Ready message names them.
	Optional *watch.Optional
	// Mapper says which resources the API server serves.
	Mapper meta.RESTMapper
	// Metrics exports each policy's conditions and counts; nil exports none.
	Metrics *metrics.Metrics
	// SignalLimits bound the deletion-signal manifests; zero: the defaults.
	SignalLimits admissionpolicy.SignalLimits
	// OperatorNamespace is where teardown records are kept; while it does
	// not exist every policy's Ready says so. Empty checks nothing.
	OperatorNamespace string
	// Guard is what the guard of the admission and flow-control objects
	// last said, for every policy's Guarded condition; nil sets none.
	Guard *GuardState

	invalidLogged reportedOnce
	pace          fleetPace
}

// +kubebuilder:rbac:groups=cleanup.fleetops.dev,resources=cleanuppolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=cleanup.fleetops.dev,resources=cleanuppolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile compiles the policy and evaluates it against every ManagedCluster.
func (r *CleanupPolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	u := snapshot.NewCleanupPolicy()
	if err := r.Get(ctx, req.NamespacedName, u); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.ForgetPolicy(req.Name)
			r.pace.forget(req.Name)
			return reconcile.Result{}, r.forgetDeleted(ctx)
		}
		return reconcile.Result{}, err
	}
	if suspended, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); suspended {
		return reconcile.Result{}, r.reconcileSuspended(ctx, u)
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
		setGuardedCondition(p, r.Guard)
		held, err := r.patchStatus(ctx, orig, p, absentCounts(u))
		retErr = errors.Join(retErr, err)
		if held > 0 && retErr == nil && (result.RequeueAfter == 0 || held < result.RequeueAfter) {
			result.RequeueAfter = held // the counts held back, written then
		}
		r.Metrics.ObservePolicy(p)
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
		r.reportInvalid(ctx, orig, p, errs)
		// Nothing to retry: only a new generation can fix it, and its
		// event brings the policy back. The condition carries the detail.
		return reconcile.Result{}, nil
	}
	began := time.Now()
	result, err = r.reconcileFleet(ctx, p, compiled)
	r.pace.passed(p.Name, time.Since(began))
	if err != nil {
		setReconcileFailed(p, err) // never Ready on what an earlier reconcile found
		return result, err
	}
	// Only now does the status describe this generation.
	p.Status.ObservedGeneration = p.Generation
	return result, nil
}

// reconcileFleet resolves every cluster's governor and reports this
// policy's share of the fleet: what it matches, governs, and shares.
func (r *CleanupPolicyReconciler) reconcileFleet(ctx context.Context, p *v1alpha1.CleanupPolicy, compiled *cel.Policy) (reconcile.Result, error) {
	policies, err := snapshot.CompileAll(ctx, r, r.Cache)
	if err != nil {
		return reconcile.Result{}, err
	}
	unserved, err := policyUnserved(r.Mapper, compiled)
	if err != nil {
		return reconcile.Result{}, err
	}
	clusters := snapshot.NewManagedClusterList()
	// Read-only (selectors, counts, names): no copy of the cache's
	// clusters, which a fleet's governing lists once per cluster event.
	if err := r.List(ctx, clusters, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	// In name order, so that the examples a status names do not change
	// from one reconcile to the next.
	sortByName(clusters.Items)

	prev := p.Status.DeepCopy()
	share := r.shareOf(ctx, policies, compiled, clusters.Items)
	standalone := decision.Standalone(policies.Ranked) != nil && decision.Standalone(policies.Ranked).UID == compiled.UID
	if err := r.countStamped(ctx, p, clusters, share.governedNames, standalone); err != nil {
		return reconcile.Result{}, err
	}
	r.reportShare(p, prev, share)

	if share.exhausted {
		setReconcilingCondition(p, v1alpha1.BudgetExhaustedReason, fmt.Sprintf(
			"evaluated %d of %d clusters before the CEL cost budget ran out; continuing", share.evaluated, len(clusters.Items)))
		logf.FromContext(ctx).Info("CEL cost budget exhausted, requeueing", "policy", p.Name)
		return reconcile.Result{RequeueAfter: budgetPause}, nil
	}
	if err := r.setFleetCondition(ctx, p, prev, compiled, share, unserved); err != nil {
		return reconcile.Result{}, err
	}
	r.forgetClusters(clusters)
	return reconcile.Result{}, nil
}

// setFleetCondition sets the condition a complete pass over the fleet
// earns, the most pressing first: a resource the API server does not
// serve, a deletion signal refused, a selector that failed, a hold on the
// hub, else Ready. A problem's Event is sent only when what it reports
// changes, so a steady fleet does not repeat it on every pass.
func (r *CleanupPolicyReconciler) setFleetCondition(ctx context.Context, p *v1alpha1.CleanupPolicy, prev *v1alpha1.CleanupPolicyStatus,
	compiled *cel.Policy, share *share, unserved []decision.UnservedField) error {
	var signalErrs field.ErrorList
	if compiled.Spec.DeletionSignal != nil {
		signalErrs = r.SignalLimits.OrDefault().Check(compiled.Spec.DeletionSignal.Manifests)
	}
	switch {
	case len(unserved) > 0:
		// Not terminal: a CRD installed later serves the resource, and its
		// events bring the policy back.
		if msg := setNotServedCondition(p, unserved); readyMessage(prev) != msg {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.ResourceNotServedReason, "Evaluate", "%s", msg)
		}
	case len(signalErrs) > 0:
		msg := "no deletion-signal work is applied: " + signalErrs.ToAggregate().Error()
		if readyMessage(prev) != msg {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.SignalRefusedReason, "Evaluate", "%s", msg)
		}
		// Only a change of the policy or of the operator's flags clears it.
		setStalledCondition(p, v1alpha1.SignalRefusedReason, msg)
	case len(share.evalErrors) > 0:
		msg := fmt.Sprintf("the selector failed on %d cluster(s), which are held: %s",
			len(share.evalErrors), strings.Join(share.evalErrors[:min(len(share.evalErrors), maxReported)], "; "))
		setStalledCondition(p, v1alpha1.EvaluationErrorReason, msg)
		if prev.EvaluationErrors != p.Status.EvaluationErrors || readyMessage(prev) != msg {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, v1alpha1.EvaluationErrorReason, "Evaluate", "%s", msg)
		}
	default:
		summary := r.readySummary(p)
		reason, msg, err := r.hubHold(ctx, share, summary)
		if err != nil {
			return err
		}
		if reason != "" {
			setStalledCondition(p, reason, msg)
			break
		}
		if r.reportHeld(p, prev, share, summary) {
			break
		}
		setReadyCondition(p, metav1.ConditionTrue, v1alpha1.SucceededReason, summary)
	}
	return nil
}

// reconcileSuspended writes the status of a suspended policy once, when
// suspend turns true: Ready True, reason Suspended, observedGeneration,
// no Reconciling or Stalled (kstatus: Current), and one Event. While it
// stays suspended, nothing else is written, not even for a new
// generation: the policy is not reconciled, and its in-use finalizer is
// neither added nor removed. Only the Guarded condition still follows the
// guard, as it says what the operator enforces, not what the policy does.
func (r *CleanupPolicyReconciler) reconcileSuspended(ctx context.Context, u *unstructured.Unstructured) error {
	p, decodeErrs := snapshot.DecodePolicy(u)
	defer func() { r.Metrics.ObservePolicy(p) }()
	if suspendedStatus(p) {
		// Only the guard's condition follows: it describes the operator.
		orig := p.DeepCopy()
		setGuardedCondition(p, r.Guard)
		_, err := r.patchStatus(ctx, orig, p, nil) // the guard's condition alone: never counts
		return err
	}
	msg := suspendedMessage
	if _, errs := r.Cache.Load(p.UID, p.Generation, func() (*v1alpha1.CleanupPolicy, field.ErrorList) { return p, decodeErrs }); len(errs) > 0 {
		// Suspended wins for writes, but the status must not hide that
		// the spec is broken: resuming it would hold what it governs.
		msg += "; the spec is invalid and must be fixed before resuming: " + errs.ToAggregate().Error()
	}
	orig := p.DeepCopy()
	setSuspendedCondition(p, msg)
	setGuardedCondition(p, r.Guard)
	if _, err := r.patchStatus(ctx, orig, p, nil); err != nil { // a suspend is never counts alone
		return err
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, v1alpha1.SuspendedReason, "Suspend", "%s", msg)
	logf.FromContext(ctx).Info("policy suspended: nothing is written for what it governs", "policy", p.Name, "generation", p.Generation)
	return nil
}

// suspendedMessage is the Ready message of a suspended policy.
const suspendedMessage = "suspended (spec.suspend is true): the operator writes nothing for the clusters, works and " +
	"ConfigurationPolicies the policy governs, and a cluster deleted meanwhile waits; set spec.suspend to false to resume"

// suspendedStatus says whether the status already says the policy is
// suspended.
func suspendedStatus(p *v1alpha1.CleanupPolicy) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ReadyCondition)
	return c != nil && c.Reason == v1alpha1.SuspendedReason
}

// setSuspendedCondition reports a suspended policy: Ready (kstatus Current:
// a suspended policy is as its owner declared it), reason
// Suspended, neither Reconciling nor Stalled, this generation observed.
func setSuspendedCondition(p *v1alpha1.CleanupPolicy, msg string) {
	p.Status.ObservedGeneration = p.Generation
	setReadyCondition(p, metav1.ConditionTrue, v1alpha1.SuspendedReason, msg)
}

// reportInvalid says that the policy does not compile: an Event when the
// condition changes, and one log line per generation, without the stack
// trace of a reconcile error; the condition carries the detail.
func (r *CleanupPolicyReconciler) reportInvalid(ctx context.Context, orig, p *v1alpha1.CleanupPolicy, errs field.ErrorList) {
	if !r.invalidLogged.first(p.UID, p.Generation) {
		return
	}
	reason := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.StalledCondition).Reason
	if !equality.Semantic.DeepEqual(orig.Status.Conditions, p.Status.Conditions) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, reason, "Compile", "%s", errs.ToAggregate().Error())
	}
	fields := make([]string, len(errs))
	for i, e := range errs {
		fields[i] = e.Field
	}
	logf.FromContext(ctx).Info("policy invalid: it governs nothing new and the clusters it governs are held",
		"policy", p.Name, "generation", p.Generation, "reason", reason, "fields", fields, "error", errs.ToAggregate().Error())
}

// forgetClusters drops the remembered results of clusters that are gone.
func (r *CleanupPolicyReconciler) forgetClusters(clusters *unstructured.UnstructuredList) {
	live := make(sets.Set[types.UID], len(clusters.Items))
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
	r.invalidLogged.forget(live.Has)
	r.Governance.Forget(func(p types.UID, _ int64, _ types.UID) bool { return live.Has(p) })
	return nil
}

// SetupWithManager watches CleanupPolicies, and ManagedClusters, whose
// changes can change what every policy matches.
func (r *CleanupPolicyReconciler) SetupWithManager(mgr manager.Manager) error {
	allPolicies := handler.EnqueueRequestsFromMapFunc(r.allPolicies)
	b := builder.ControllerManagedBy(mgr).
		Named("cleanuppolicy").
		For(snapshot.NewCleanupPolicy(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Another policy's change can change this one's overlaps.
		Watches(snapshot.NewCleanupPolicy(), allPolicies, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(snapshot.NewManagedCluster(), r.pacedPolicies()).
		// A CRD installed or removed can serve a resource a policy names.
		Watches(watch.CrdMetadata(), allPolicies).
		WatchesRawSource(r.Tally.Source())
	if r.OperatorNamespace != "" {
		b = b.Watches(&corev1.Namespace{}, allPolicies, builder.WithPredicates(r.operatorNamespace()))
	}
	if r.Optional != nil {
		// An optional kind turned on or off changes every Ready message.
		b = b.WatchesRawSource(r.Optional.Source(allPolicies))
	}
	if r.Guard != nil {
		// A restore, or the guard's start, changes every policy's Guarded.
		b = b.WatchesRawSource(r.Guard.source(allPolicies))
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
