package governance

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"
)

// RetireSignalWorks runs governance's retirement of the signal works of a
// cluster it read not being deleted, other than keep, with the clients
// given, for the operator's integration suite (internal/controller). The
// manager never calls it.
func RetireSignalWorks(ctx context.Context, c client.Client, reader client.Reader, cluster, keep string) error {
	a := &ManagedClusterAdapter{ClusterWriter: teardown.ClusterWriter{Client: c, APIReader: reader}, Teardowns: teardown.NewTeardowns(nil)}
	return a.RetireSignalWorks(ctx, cluster, keep)
}
