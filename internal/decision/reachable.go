package decision

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// ClusterLeaseName is the Lease, in the cluster namespace, that a
// cluster's registration agent renews and from which OCM's hub decides
// whether the cluster is available.
const ClusterLeaseName = "managed-cluster-lease"

// leaseGraceTimes is how many lease durations OCM's hub lets pass without
// a renewal before it reads the cluster as unavailable.
const leaseGraceTimes = 5

// defaultLeaseDurationSeconds is the lease duration OCM takes when the
// ManagedCluster sets none.
const defaultLeaseDurationSeconds = 60

// maxLeaseDurationSeconds bounds the lease duration the grace is counted
// from, so that it never overflows: a longer one is as good as forever.
const maxLeaseDurationSeconds = 1 << 30

// Available says whether the cluster is available: its
// ManagedClusterConditionAvailable is True, or, whatever the condition
// says, its agent renewed its lease within OCM's grace period. Whoever may
// write a ManagedCluster's status can write that condition; only the
// cluster's agent (and OCM's hub) renews the lease, so a condition written
// to make a BestEffort teardown force at once is not believed while the
// agent still renews. Without a lease (it was not read, or there is none)
// the condition decides.
func (s *Snapshot) Available() bool {
	return meta.IsStatusConditionTrue(ClusterConditions(s.Cluster), clusterv1.ManagedClusterConditionAvailable) ||
		s.leaseFreshFor() > 0
}

// leaseFreshFor is how long the cluster's lease stays within OCM's grace
// period; 0 or less when it is not fresh, or there is none.
func (s *Snapshot) leaseFreshFor() time.Duration {
	if s.Lease == nil || s.Lease.Spec.RenewTime == nil {
		return 0
	}
	return s.Lease.Spec.RenewTime.Add(LeaseGrace(s.Cluster)).Sub(s.Now)
}

// LeaseGrace is how long OCM's hub waits for a renewal of the cluster's
// lease before it reads the cluster as unavailable.
func LeaseGrace(mc *unstructured.Unstructured) time.Duration {
	secs, _, _ := unstructured.NestedInt64(mc.Object, "spec", "leaseDurationSeconds")
	if secs <= 0 {
		secs = defaultLeaseDurationSeconds
	}
	secs = min(secs, maxLeaseDurationSeconds)
	return time.Duration(leaseGraceTimes*secs) * time.Second
}

// reachability says why a cluster whose Available condition is not True
// is taken as available, with the time at which that ends; "" and 0 when
// the condition decides.
func (s *Snapshot) reachability() (why string, until time.Duration) {
	if meta.IsStatusConditionTrue(ClusterConditions(s.Cluster), clusterv1.ManagedClusterConditionAvailable) {
		return "", 0
	}
	fresh := s.leaseFreshFor()
	if fresh <= 0 {
		return "", 0
	}
	return fmt.Sprintf("its %s condition is not True, but its agent renewed the Lease %s %s ago, within OCM's grace of %s: it is taken as available until the lease is stale",
		clusterv1.ManagedClusterConditionAvailable, ClusterLeaseName, s.Now.Sub(s.Lease.Spec.RenewTime.Time).Round(time.Second), LeaseGrace(s.Cluster)), fresh
}
