package governance

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
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

// ApplySignalWork runs governance's write of the deletion-signal work name
// of the cluster mc under p, with the clients given, for the operator's
// integration suite. The manager never calls it.
func ApplySignalWork(ctx context.Context, c client.Client, reader client.Reader, mc *unstructured.Unstructured, name string, p *cel.Policy) error {
	a := &ManagedClusterAdapter{ClusterWriter: teardown.ClusterWriter{Client: c, APIReader: reader}, Teardowns: teardown.NewTeardowns(nil)}
	return a.applySignalWork(ctx, mc, name, p)
}
