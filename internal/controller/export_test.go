package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// DeleteCollection runs the executor's deletecollection of a group with
// the clients given, calling before between its check and its request, and
// says whether it deleted the group that way.
func DeleteCollection(ctx context.Context, c client.Client, reader client.Reader, mc *unstructured.Unstructured, plan *decision.Plan,
	acts []decision.Action, before func()) (bool, error) {
	a := &ManagedClusterAdapter{Client: c, apiReader: reader, Metrics: NewMetrics(), inflight: newInflight(), beforeCollection: before}
	return a.deleteCollection(ctx, mc, plan, acts)
}
