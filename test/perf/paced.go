package main

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// notBegun are the reasons of the operator's ContentDeleteSuccess
// condition on a cluster whose teardown has not made its first write
// (api/v1alpha1: WaitingForHooks, Resumed, BlastRadiusExceeded,
// WaitingForTurn).
var notBegun = map[string]bool{"WaitingForHooks": true, "Resumed": true, "BlastRadiusExceeded": true, "WaitingForTurn": true}

// peakConcurrency is the most teardowns seen under way at once: begun
// (the condition is there with another reason) and not finished.
type peakConcurrency struct{ max atomic.Int64 }

// watch lists the clusters every 250 ms until ctx ends.
func (p *peakConcurrency) watch(ctx context.Context, c client.Client) {
	for ctx.Err() == nil {
		var list clusterv1.ManagedClusterList
		if err := c.List(ctx, &list); err == nil {
			var n int64
			for i := range list.Items {
				if underWay(list.Items[i].Status.Conditions) {
					n++
				}
			}
			if n > p.max.Load() {
				p.max.Store(n)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func underWay(conds []metav1.Condition) bool {
	c := meta.FindStatusCondition(conds, "ContentDeleteSuccess")
	return c != nil && c.Status != metav1.ConditionTrue && !(c.Status == metav1.ConditionUnknown && notBegun[c.Reason])
}
