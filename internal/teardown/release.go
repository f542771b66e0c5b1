package teardown

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"

	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// ClusterAnnotations are the annotations the operator puts on a
// ManagedCluster; a released cluster keeps none of them.
var ClusterAnnotations = decision.ClusterAnnotations

// UnlabelNamespace removes the cluster-deleting label from the namespace
// of a cluster not being deleted. Admission refuses new ManifestWorks and
// add-ons in a labelled namespace, so a label left behind would refuse
// every work of a cluster re-imported under the same name, the operator's
// signal work included.
//
// The label may instead be a teardown's that began after the cluster was
// read: a fresh read of the cluster, after the namespace's, says so, and
// the label stays. The namespace (nil: none) is unlabelled only as it was
// read (its UID and resourceVersion): a namespace changed meanwhile is left
// to its event, which brings the cluster back. It says whether it wrote.
func (a *ClusterWriter) UnlabelNamespace(ctx context.Context, ns *corev1.Namespace) (bool, error) {
	if ns == nil || ns.DeletionTimestamp != nil {
		return false, nil
	}
	if _, labelled := ns.Labels[v1alpha1.ClusterDeletingLabel]; !labelled {
		return false, nil
	}
	if deleting, err := a.DeletingNow(ctx, ns.Name); err != nil || deleting {
		return false, err // a teardown's label
	}
	return a.setDeletingLabel(ctx, ns.Name, ns.UID, ns.ResourceVersion, false)
}

// ClusterNamespace reads the namespace of the cluster name from the cache;
// nil when there is none.
func (a *ClusterWriter) ClusterNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := a.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return ns, nil
}

// DeletingNow says whether the cluster is being deleted, read from the API
// server rather than the cache: governance, which acts on a cluster it read
// not being deleted, asks before it undoes what a teardown begun since may
// rely on.
func (a *ClusterWriter) DeletingNow(ctx context.Context, name string) (bool, error) {
	reader := a.APIReader
	if reader == nil {
		reader = a.Client
	}
	mc := snapshot.NewManagedCluster()
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return mc.GetDeletionTimestamp() != nil, nil
}

// setDeletingLabel puts the cluster-deleting label on a namespace, or takes
// it off, on exactly the namespace of that UID and, when rv is set, only as
// it was read, and says whether it did: a namespace changed meanwhile (or a
// cache behind the last write) is refused, not written, and left to its
// event.
func (a *ClusterWriter) setDeletingLabel(ctx context.Context, name string, uid types.UID, rv string, on bool) (written bool, err error) {
	var value any
	verb := "unlabelled"
	if on {
		value, verb = "true", "labelled"
	}
	return a.patchNamespace(ctx, name, uid, rv, namespaceMarks{labels: map[string]any{v1alpha1.ClusterDeletingLabel: value}}, verb)
}

// namespaceMarks are labels and annotations to write on a namespace; a nil
// value removes one.
type namespaceMarks struct {
	labels, annotations map[string]any
}

// patchNamespace writes marks on the namespace of that UID and, when rv is
// set, only as it was read, and says whether it did, as setDeletingLabel.
func (a *ClusterWriter) patchNamespace(ctx context.Context, name string, uid types.UID, rv string, m namespaceMarks, verb string) (written bool, err error) {
	md := map[string]any{"uid": uid, "labels": m.labels}
	if rv != "" {
		md["resourceVersion"] = rv
	}
	if len(m.annotations) > 0 {
		md["annotations"] = m.annotations
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return false, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := a.Client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			logf.FromContext(ctx).Info("cluster namespace changed since it was read; not "+verb+" yet", "namespace", name)
			return false, nil
		}
		return false, client.IgnoreNotFound(err)
	}
	logf.FromContext(ctx).Info("cluster namespace "+verb, "namespace", name, "labels", slices.Sorted(maps.Keys(m.labels)))
	return true, nil
}

func HasClusterAnnotations(mc *unstructured.Unstructured) bool {
	for _, key := range ClusterAnnotations {
		if _, ok := mc.GetAnnotations()[key]; ok {
			return true
		}
	}
	return false
}

// ClusterWriter is what the governance of clusters and their teardown
// both write with.
type ClusterWriter struct {
	Client   client.Client
	Recorder events.EventRecorder
	Metrics  *metrics.Metrics
	// Tally counts, per policy, the objects the operator leaves alone
	// because it did not create them.
	Tally *tally.Tally
	// apiReader reads a work, managedFields included, when orphaning it
	// conflicts, and a signal work the cache may not show applied yet.
	APIReader client.Reader
}

func SetAnnotation(o metav1.Object, key, value string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	o.SetAnnotations(a)
}

func RemoveAnnotation(o metav1.Object, key string) {
	a := o.GetAnnotations()
	delete(a, key)
	o.SetAnnotations(a)
}
