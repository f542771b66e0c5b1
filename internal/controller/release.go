package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// clusterAnnotations are the annotations the operator puts on a
// ManagedCluster; a released cluster keeps none of them.
var clusterAnnotations = []string{v1alpha1.GoverningPolicyAnnotation, ForcedObjectsAnnotation, ForcingAnnotation, UnconfirmedOrphansAnnotation}

// releaseDeleting lets a cluster being deleted go without a cleanup, when no
// policy governs it any more: it takes back the namespace label, the
// operator's annotations and, last, the finalizer. The cluster's content is
// left as it is. A cluster re-imported under the same name then finds a
// namespace where its works are admitted.
func (a *ManagedClusterAdapter) releaseDeleting(ctx context.Context, mc *unstructured.Unstructured, msg string) error {
	clearNotOwnedWorks(a.Tally, mc.GetName())
	if err := a.unlabelNamespace(ctx, mc.GetName()); err != nil {
		return err
	}
	if err := a.removeClusterAnnotations(ctx, mc); err != nil {
		return err
	}
	return a.removeFinalizer(ctx, mc, "Released", msg)
}

// removeClusterAnnotations removes the operator's annotations from the
// cluster, on the cluster as read.
func (a *ManagedClusterAdapter) removeClusterAnnotations(ctx context.Context, mc *unstructured.Unstructured) error {
	before := mc.DeepCopy()
	changed := false
	for _, key := range clusterAnnotations {
		if _, ok := mc.GetAnnotations()[key]; ok {
			removeAnnotation(mc, key)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := a.Client.Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// unlabelNamespace removes the cluster-deleting label from the cluster
// namespace. Admission refuses new ManifestWorks and add-ons in a labelled
// namespace, so a label left behind would refuse every work of a cluster
// re-imported under the same name, the operator's signal work included.
func (a *ManagedClusterAdapter) unlabelNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{}
	if err := a.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	return a.unlabel(ctx, ns)
}

// unlabel removes the cluster-deleting label from a namespace in hand.
func (a *ManagedClusterAdapter) unlabel(ctx context.Context, ns *corev1.Namespace) error {
	if _, labelled := ns.Labels[v1alpha1.ClusterDeletingLabel]; !labelled || ns.DeletionTimestamp != nil {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"labels":{%q:null}}}`, ns.UID, v1alpha1.ClusterDeletingLabel)
	if err := a.Client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return client.IgnoreNotFound(err)
	}
	logf.FromContext(ctx).Info("cluster namespace unlabelled", "namespace", ns.Name, "label", v1alpha1.ClusterDeletingLabel)
	return nil
}

func hasClusterAnnotations(mc *unstructured.Unstructured) bool {
	for _, key := range clusterAnnotations {
		if _, ok := mc.GetAnnotations()[key]; ok {
			return true
		}
	}
	return false
}
