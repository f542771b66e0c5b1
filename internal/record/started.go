package record

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Started is a teardown a record says began: its cluster and when the
// cluster was deleted.
type Started struct {
	Cluster string
	UID     types.UID
	Start   time.Time
}

// StartedUnder lists, from the records' metadata alone, the teardowns of a
// policy's clusters begun since since (dry runs, which write nothing, and
// records of holds before the first write are not teardowns begun). A
// record written before it carried the policy and start annotations is not
// counted.
func StartedUnder(ctx context.Context, c client.Reader, namespace, policy string, since time.Time) ([]Started, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	sel := client.MatchingLabels{RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}
	if err := c.List(ctx, list, client.InNamespace(namespace), sel); err != nil {
		return nil, fmt.Errorf("listing the teardown records in %s: %w", namespace, err)
	}
	var out []Started
	for _, cm := range list.Items {
		if cm.Annotations[PolicyAnnotation] != policy || cm.Labels[DryRunLabel] == "true" || cm.Annotations[NotBegunAnnotation] == "true" {
			continue
		}
		start, err := time.Parse(time.RFC3339, cm.Annotations[StartAnnotation])
		if err != nil || !start.After(since) {
			continue
		}
		out = append(out, Started{Cluster: cm.Labels[ClusterLabel], UID: types.UID(cm.Labels[ClusterUIDLabel]), Start: start})
	}
	return out, nil
}
