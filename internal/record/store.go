package record

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// Load reads the record of the given name; nil without error when there is
// none. A ConfigMap of that name that is not a record of the operator's is
// an error: it is neither changed nor taken for one.
func Load(ctx context.Context, c client.Reader, namespace, name string) (*Record, *corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading the teardown record %s/%s: %w", namespace, name, err)
	}
	if !IsRecord(cm) {
		return nil, nil, fmt.Errorf("ConfigMap %s/%s is not a teardown record of the operator's (labels %s=true, %s=%s): "+
			"it is left alone, and the teardown holds until it is renamed or removed", namespace, name, RecordLabel, v1alpha1.ManagedByLabel, v1alpha1.ManagedBy)
	}
	r, err := Decode(cm)
	if err != nil {
		return nil, nil, err
	}
	return r, cm, nil
}

// Save writes the record: a create when cm is nil, else an update of cm
// as last read or written, so that a record someone else changed
// meanwhile is a conflict, not overwritten. It returns the ConfigMap as
// written.
func Save(ctx context.Context, c client.Client, namespace string, r *Record, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	out := &corev1.ConfigMap{}
	if cm != nil {
		out = cm.DeepCopy()
	}
	out.Namespace = namespace
	if err := Encode(r, out); err != nil {
		return nil, err
	}
	var err error
	if cm == nil {
		err = c.Create(ctx, out)
	} else {
		err = c.Update(ctx, out)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the teardown record %s/%s: %w", namespace, r.Name, err)
	}
	return out, nil
}

// List reads the records of a cluster (all records when cluster is empty),
// the newest first.
func List(ctx context.Context, c client.Reader, namespace, cluster string) ([]Record, error) {
	cms, err := listConfigMaps(ctx, c, namespace, cluster)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(cms))
	for i := range cms {
		r, err := Decode(&cms[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	SortNewestFirst(out)
	return out, nil
}

func listConfigMaps(ctx context.Context, c client.Reader, namespace, cluster string) ([]corev1.ConfigMap, error) {
	sel := client.MatchingLabels{RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}
	if cluster != "" {
		sel[ClusterLabel] = labelValue(cluster)
	}
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), sel); err != nil {
		return nil, fmt.Errorf("listing the teardown records in %s: %w", namespace, err)
	}
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		if cluster == "" || cm.Labels[ClusterLabel] == labelValue(cluster) {
			out = append(out, cm)
		}
	}
	return out, nil
}

// Retention bounds the records kept: at most PerCluster ended records per
// cluster, none that ended longer than MaxAge ago. A record of a teardown
// in progress is always kept. Zero disables a bound.
type Retention struct {
	PerCluster int
	MaxAge     time.Duration
	// Window, when set, is the blast-radius window of a policy (0: none,
	// or no such policy). A record of a teardown its policy's window still
	// counts is kept past MaxAge: a window longer than MaxAge (a policy
	// admitted without the webhook, or stored before MaxAge was lowered)
	// would otherwise count fewer teardowns than began within it.
	Window func(ctx context.Context, policy string) (time.Duration, error)
}

// Prune deletes the ended records past the retention (of one cluster, or
// of all when cluster is empty) and returns their names. Each delete
// carries the record's UID: a record recreated meanwhile is not deleted.
//
// It reads metadata only (labels and the start, policy and end
// annotations): through the manager's cache, which keeps the hub's
// ConfigMaps as metadata.
func Prune(ctx context.Context, c client.Client, namespace, cluster string, keep Retention, now time.Time) ([]string, error) {
	sel := client.MatchingLabels{RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}
	if cluster != "" {
		sel[ClusterLabel] = labelValue(cluster)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, list, client.InNamespace(namespace), sel); err != nil {
		return nil, fmt.Errorf("listing the teardown records in %s: %w", namespace, err)
	}
	byCluster := map[string][]metav1.PartialObjectMetadata{}
	for _, cm := range list.Items {
		if _, ended := Ended(&cm); ended && IsRecord(&cm) && (cluster == "" || cm.Labels[ClusterLabel] == labelValue(cluster)) {
			byCluster[cm.Labels[ClusterLabel]] = append(byCluster[cm.Labels[ClusterLabel]], cm)
		}
	}
	counted := &windows{ctx: ctx, window: keep.Window, now: now, of: map[string]time.Duration{}}
	var pruned []string
	for _, ended := range byCluster {
		slices.SortStableFunc(ended, func(a, b metav1.PartialObjectMetadata) int {
			ta, _ := Ended(&a)
			tb, _ := Ended(&b)
			return tb.Compare(ta.Time)
		})
		for i, cm := range ended {
			end, _ := Ended(&cm)
			tooMany := keep.PerCluster > 0 && i >= keep.PerCluster
			tooOld := keep.MaxAge > 0 && now.Sub(end.Time) > keep.MaxAge
			if !tooMany && !tooOld {
				continue
			}
			if !tooMany && counted.counts(&cm) {
				continue
			}
			uid := cm.UID
			cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
			if err := c.Delete(ctx, &cm, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return pruned, fmt.Errorf("deleting the teardown record %s/%s: %w", namespace, cm.Name, err)
			}
			pruned = append(pruned, cm.Name)
		}
	}
	slices.Sort(pruned)
	return pruned, counted.err
}

// windows reads the blast-radius windows of the policies records name,
// each once per Prune.
type windows struct {
	ctx    context.Context
	window func(context.Context, string) (time.Duration, error)
	now    time.Time
	of     map[string]time.Duration
	err    error // the first window that could not be read
}

// counts says whether a record's teardown is still counted by the window
// of the policy the record names: begun (its start annotation) within it.
// Dry runs are never counted, nor a record without a policy or a start. A
// window that cannot be read keeps the record, and Prune returns the error.
func (k *windows) counts(cm *metav1.PartialObjectMetadata) bool {
	policy := cm.Annotations[PolicyAnnotation]
	if k.window == nil || policy == "" || cm.Labels[DryRunLabel] == "true" {
		return false
	}
	start, err := time.Parse(time.RFC3339, cm.Annotations[StartAnnotation])
	if err != nil {
		return false
	}
	w, ok := k.of[policy]
	if !ok {
		if w, err = k.window(k.ctx, policy); err != nil {
			k.err = cmp.Or(k.err, fmt.Errorf("reading the blast-radius window of CleanupPolicy %s: %w", policy, err))
			return true
		}
		k.of[policy] = w
	}
	return w > 0 && start.After(k.now.Add(-w))
}
