package snapshot

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// readFleet reads, for a deleted cluster whose policy (or the operator)
// sets a blast radius, the policy's clusters: how many it governs and those
// being deleted under the operator's finalizer. A cluster belongs to the
// policy by its governing-policy annotation, which the operator writes with
// its finalizer: the same set for every replica and every restart. Only the
// clusters OCM accepted (spec.hubAcceptsClient, which OCM lets only those
// who may accept clusters set) count toward the base of a percentage, so
// that creating clusters does not raise a budget.
func (r *Reader) readFleet(ctx context.Context, s *decision.Snapshot, p *cel.Policy) error {
	if s.Cluster.GetDeletionTimestamp() == nil || p.Spec.BlastRadius == nil && !bounds(r.BlastRadius) {
		return nil
	}
	// The cache's own objects, read and never changed: every reconcile of
	// a deleted cluster under a budget reads the whole fleet.
	list := NewManagedClusterList()
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	f := &decision.Fleet{Default: r.BlastRadius}
	for i := range list.Items {
		mc := &list.Items[i]
		if !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) || decision.Pin(mc) != p.Name {
			continue
		}
		if accepted, _, _ := unstructured.NestedBool(mc.Object, "spec", "hubAcceptsClient"); accepted {
			f.Governed++
		}
		if mc.GetDeletionTimestamp() != nil {
			f.Deleting = append(f.Deleting, mc)
		}
	}
	// The cluster planned counts as read, even when the list is behind it.
	if i := slices.IndexFunc(f.Deleting, func(c *unstructured.Unstructured) bool { return c.GetUID() == s.Cluster.GetUID() }); i >= 0 {
		f.Deleting[i] = s.Cluster
	} else {
		f.Deleting = append(f.Deleting, s.Cluster)
	}
	if err := r.readBegun(ctx, s, p, f); err != nil {
		return err
	}
	s.Fleet = f
	return nil
}

// readBegun reads the teardowns begun under the policy from their records:
// they count after their clusters are gone, within the longest window a
// budget may name. A record also says that a cluster still being deleted
// began its teardown, however long ago it was deleted (a record's start is
// its cluster's deletion): those are read too.
func (r *Reader) readBegun(ctx context.Context, s *decision.Snapshot, p *cel.Policy, f *decision.Fleet) error {
	if r.RecordsNamespace == "" {
		return nil
	}
	b := decision.BudgetOf(p.Spec.BlastRadius, r.BlastRadius, f.Governed)
	since := s.Now.Add(-b.Window)
	for _, mc := range f.Deleting {
		if d := mc.GetDeletionTimestamp().Add(-time.Second); d.Before(since) {
			since = d
		}
	}
	records := r.Records
	if records == nil {
		records = r.Client
	}
	started, err := record.StartedUnder(ctx, records, r.RecordsNamespace, p.Name, since)
	if err != nil {
		return err
	}
	for _, st := range started {
		f.Begun = append(f.Begun, decision.Started{Cluster: st.Cluster, UID: st.UID, Start: st.Start})
	}
	return nil
}

// bounds says whether a budget bounds anything.
func bounds(b v1alpha1.BlastRadius) bool {
	return b.MaxTeardowns != nil || b.MaxConcurrent != nil
}
