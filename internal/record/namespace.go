package record

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// NamespaceMissingMessage is the line logged at start when the records'
// namespace does not exist.
const NamespaceMissingMessage = "the operator's namespace does not exist: every teardown is held until it does, as no teardown record can be written; create it, or set --operator-namespace to one that exists"

// NamespaceCheck says once, at start, that the namespace the records are
// kept in does not exist: no teardown can go on until it does. Each
// policy's Ready says it too, for as long as it lasts.
type NamespaceCheck struct {
	// Reader reads the API server, not a cache not started yet.
	Reader    client.Reader
	Namespace string
}

// Start implements manager.Runnable: it checks once and returns.
func (c *NamespaceCheck) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("teardown-records")
	err := c.Reader.Get(ctx, client.ObjectKey{Name: c.Namespace}, &corev1.Namespace{})
	switch {
	case apierrors.IsNotFound(err):
		log.Info(NamespaceMissingMessage, "namespace", c.Namespace)
	case err != nil:
		log.Info("the operator's namespace could not be read at start", "namespace", c.Namespace, "error", err.Error())
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica says it.
func (c *NamespaceCheck) NeedLeaderElection() bool { return false }
