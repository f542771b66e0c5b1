package teardown

// The functions here run one phase of a teardown alone, with the clients
// given, for the operator's integration suite (internal/controller), which
// drives them against a real API server. The manager never calls them.

import (
	"context"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// DeleteCollection runs the executor's deletecollection of a group with
// the clients given, calling before between its check and its request, and
// says whether it deleted the group that way. The admission policy must
// have been as it is for settle.
func DeleteCollection(ctx context.Context, c client.Client, reader client.Reader, mc *unstructured.Unstructured, plan *decision.Plan,
	acts []decision.Action, settle time.Duration, before func()) (bool, error) {
	metrics := metrics.NewMetrics()
	a := &ClusterTeardown{ClusterWriter: ClusterWriter{Client: c, APIReader: reader, Metrics: metrics}, Teardowns: NewTeardowns(metrics), beforeCollection: before,
		admissionSettle: settle}
	ok, _, err := a.deleteCollection(ctx, mc, plan, acts)
	return ok, err
}

// DeleteCollectionLeavingOut is DeleteCollection leaving out at most
// maxLeftOut objects by name.
func DeleteCollectionLeavingOut(ctx context.Context, c client.Client, reader client.Reader, mc *unstructured.Unstructured, plan *decision.Plan,
	acts []decision.Action, maxLeftOut int) (bool, error) {
	metrics := metrics.NewMetrics()
	a := &ClusterTeardown{ClusterWriter: ClusterWriter{Client: c, APIReader: reader, Metrics: metrics}, Teardowns: NewTeardowns(metrics), maxLeftOut: maxLeftOut}
	ok, _, err := a.deleteCollection(ctx, mc, plan, acts)
	return ok, err
}

// DeleteAll runs the executor's deletes of a step, a collection first,
// counting them in m, and returns the UIDs it deleted.
func DeleteAll(ctx context.Context, c client.Client, reader client.Reader, mc *unstructured.Unstructured, plan *decision.Plan,
	acts []decision.Action, m *metrics.Metrics) ([]types.UID, error) {
	a := &ClusterTeardown{ClusterWriter: ClusterWriter{Client: c, APIReader: reader, Metrics: m}, Teardowns: NewTeardowns(m)}
	done, err := a.deleteAll(ctx, mc, plan, acts)
	return sets.List(done), err
}

// UnlabelNamespace runs governance's removal of the cluster-deleting label
// from the namespace of a cluster it read not being deleted.
func UnlabelNamespace(ctx context.Context, c client.Client, reader client.Reader, name string) error {
	w := &ClusterWriter{Client: c, APIReader: reader}
	ns, err := w.ClusterNamespace(ctx, name)
	if err != nil {
		return err
	}
	_, err = w.UnlabelNamespace(ctx, ns)
	return err
}

// ClusterPatch is the teardown's patch helper of a ManagedCluster.
type ClusterPatch struct{ p *clusterPatch }

// NewClusterPatch makes the helper from the cluster as read.
func NewClusterPatch(c client.Client, mc *unstructured.Unstructured) ClusterPatch {
	return ClusterPatch{newClusterPatch(c, mc)}
}

// Annotate sets an annotation in memory.
func (p ClusterPatch) Annotate(key, value string) { p.p.annotate(key, value) }

// SetCondition sets ContentDeleteSuccess False in memory.
func (p ClusterPatch) SetCondition(reason, message string) bool {
	return p.p.setCondition(metav1.ConditionFalse, reason, message)
}

// Flush writes what changed, and says what it wrote.
func (p ClusterPatch) Flush(ctx context.Context) (metadata, status bool, err error) {
	done, err := p.p.flush(ctx, "testing", noCheck)
	return done.metadata, done.status, err
}

// FlushForcing is the flush before a force, and says whether, with
// nothing to write, it checked the cluster.
func (p ClusterPatch) FlushForcing(ctx context.Context) (checked bool, err error) {
	done, err := p.p.flushForcing(ctx)
	return done.checked, err
}

// RemoveFinalizer removes the finalizer and the annotations named.
func (p ClusterPatch) RemoveFinalizer(ctx context.Context, finalizer string, annotations ...string) (bool, error) {
	return p.p.removeFinalizer(ctx, finalizer, annotations, false)
}

// RemoveLastFinalizer removes the finalizer only while it is the only one.
func (p ClusterPatch) RemoveLastFinalizer(ctx context.Context, finalizer string) (bool, error) {
	return p.p.removeFinalizer(ctx, finalizer, nil, true)
}

// AdmissionProbe names the work of the dry-run create that checks a
// namespace is closed.
const AdmissionProbe = admissionProbe

// LastWritten is when an object was created or last written, as its
// managed fields say.
var LastWritten = lastWritten

// NamespaceClosed returns the executor's check that no object can be
// created in a cluster's namespace, as one teardown of mc makes it again
// and again.
func NamespaceClosed(c client.Client, reader client.Reader, mc *unstructured.Unstructured, settle time.Duration) func(ctx context.Context) bool {
	metrics := metrics.NewMetrics()
	a := &ClusterTeardown{ClusterWriter: ClusterWriter{Client: c, APIReader: reader, Metrics: metrics}, Teardowns: NewTeardowns(metrics),
		admissionSettle: settle}
	a.Teardowns.of(mc.GetName(), mc.GetUID())
	return func(ctx context.Context) bool { return a.namespaceClosed(ctx, mc, mc.GetName()) }
}
