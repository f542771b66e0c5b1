package testenv

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"
)

// workAgentFinalizer is the finalizer OCM's work agent puts on the works it applied.
const workAgentFinalizer = "cluster.open-cluster-management.io/manifest-work-cleanup"

// RunWorkAgent plays OCM's work agent for every cluster of a local control
// plane, which has no managed cluster behind it: it applies each work's
// latest generation (its finalizer, and an Applied condition that observed
// the generation), and lets a deleted work go (removes its finalizer), as
// the agent does once it removed or orphaned the work's resources. It polls
// until ctx ends.
func RunWorkAgent(ctx context.Context, c client.Client, every time.Duration) {
	NewWorkAgent(c).Run(ctx, every)
}

// WorkAgent is the work agent of RunWorkAgent, whose clusters can go
// offline: the agent of an offline cluster does nothing, as when the
// managed cluster is unreachable.
type WorkAgent struct {
	c       client.Client
	mu      sync.Mutex
	offline map[string]bool
}

// NewWorkAgent returns an agent writing with c, every cluster online.
func NewWorkAgent(c client.Client) *WorkAgent {
	return &WorkAgent{c: c, offline: map[string]bool{}}
}

// SetOffline takes the agent of the cluster whose namespace is given
// offline (true) or back online.
func (a *WorkAgent) SetOffline(namespace string, offline bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.offline[namespace] = offline
}

func (a *WorkAgent) isOffline(namespace string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.offline[namespace]
}

// Run polls until ctx ends, as RunWorkAgent.
func (a *WorkAgent) Run(ctx context.Context, every time.Duration) {
	c := a.c
	for ctx.Err() == nil {
		var works workv1.ManifestWorkList
		if err := c.List(ctx, &works); err == nil {
			for i := range works.Items {
				if !a.isOffline(works.Items[i].Namespace) {
					_ = agentStep(ctx, c, &works.Items[i])
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

func agentStep(ctx context.Context, c client.Client, w *workv1.ManifestWork) error {
	has := slices.Contains(w.Finalizers, workAgentFinalizer)
	switch {
	case w.DeletionTimestamp != nil:
		if !has {
			return nil
		}
		before := w.DeepCopy()
		w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == workAgentFinalizer })
		return c.Patch(ctx, w, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	case !has:
		before := w.DeepCopy()
		w.Finalizers = append(w.Finalizers, workAgentFinalizer)
		return c.Patch(ctx, w, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}
	if applied := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); applied != nil && applied.ObservedGeneration >= w.Generation {
		return nil
	}
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: workv1.WorkApplied, Status: metav1.ConditionTrue,
		Reason: "AppliedManifestWorkComplete", Message: "applied by the local control plane's simulated work agent", ObservedGeneration: w.Generation})
	return c.Status().Update(ctx, w)
}
