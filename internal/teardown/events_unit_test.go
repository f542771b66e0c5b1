package teardown

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// TestDeleteEventReachesTheTeardown: a cluster's delete event is not
// dropped; the teardown learns that a cluster is gone from a reconcile.
func TestDeleteEventReachesTheTeardown(t *testing.T) {
	mc := snapshot.NewManagedCluster()
	mc.SetName("c1")
	if !(&ClusterTeardown{}).Events().Delete(event.DeleteEvent{Object: mc}) {
		t.Error("a delete event dropped; the teardown is told of gone clusters by a reconcile")
	}
}
