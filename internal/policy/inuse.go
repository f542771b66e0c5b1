package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetops-dev/cleanup-operator/internal/watch"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// +kubebuilder:rbac:groups=cleanup.fleetops.dev,resources=cleanuppolicies,verbs=patch

// maxWaitingNamed bounds the clusters a terminating policy's status names.
const maxWaitingNamed = 10

// reconcileInUse keeps the in-use finalizer on a policy while it is needed,
// and returns the clusters being torn down under the policy.
//
// A policy carries the finalizer while some ManagedCluster names it as its
// governor and carries the cluster-cleanup finalizer: any of them may start
// a teardown at any moment, so a policy deleted together with its clusters
// (one `kubectl delete -f`) still finishes their teardowns. A policy being
// deleted governs nothing new: the clusters it governs that are not being
// deleted are released (or go to the next policy), and it keeps the
// finalizer only until the teardowns it governs have ended.
//
// The policy is handled as stored, undecoded: a finalizer is metadata, and a
// policy the operator cannot decode still gets and loses it.
func (r *CleanupPolicyReconciler) reconcileInUse(ctx context.Context, p *unstructured.Unstructured) (teardowns []string, err error) {
	clusters := snapshot.NewManagedClusterList()
	// Read-only: no copy of the cache.
	if err := r.List(ctx, clusters, client.MatchingFields{watch.GoverningPolicyIndex: p.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the clusters of CleanupPolicy %s: %w", p.GetName(), err)
	}
	governs := false
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if decision.Pin(c) != p.GetName() ||
			!slices.Contains(c.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
			continue
		}
		governs = true
		if c.GetDeletionTimestamp() != nil {
			teardowns = append(teardowns, c.GetName())
		}
	}
	slices.Sort(teardowns)

	need := governs
	if p.GetDeletionTimestamp() != nil {
		need = len(teardowns) > 0
	}
	if need == controllerutil.ContainsFinalizer(p, v1alpha1.InUseFinalizer) {
		return teardowns, nil
	}
	before := p.DeepCopy()
	if need {
		controllerutil.AddFinalizer(p, v1alpha1.InUseFinalizer)
	} else {
		controllerutil.RemoveFinalizer(p, v1alpha1.InUseFinalizer)
	}
	// The optimistic lock: a cluster governed meanwhile brings the policy
	// back, and the finalizer is never removed on a stale read.
	if err := r.Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !need && p.GetDeletionTimestamp() != nil {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "Released", "Delete",
			"no teardown runs under the policy any more; it can go")
		logf.FromContext(ctx).Info("policy released", "policy", p.GetName())
	}
	return teardowns, nil
}

// reportTerminating says, on a policy being deleted, which teardowns it
// waits for, with an Event when that list changes.
func (r *CleanupPolicyReconciler) reportTerminating(p *v1alpha1.CleanupPolicy, teardowns []string) {
	p.Status.ObservedGeneration = p.Generation
	p.Status.ClustersDeleting = int32(len(teardowns))
	if len(teardowns) == 0 {
		return
	}
	named := teardowns[:min(len(teardowns), maxWaitingNamed)]
	msg := fmt.Sprintf("being deleted; waiting for the teardown of %d cluster(s) it governs: %s",
		len(teardowns), strings.Join(named, ", "))
	if len(teardowns) > len(named) {
		msg += fmt.Sprintf(" and %d more", len(teardowns)-len(named))
	}
	if readyMessage(&p.Status) != msg {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "InUse", "Delete", "%s", msg)
	}
	setReconcilingCondition(p, v1alpha1.TerminatingReason, msg)
}
