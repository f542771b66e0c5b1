package operator

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// stripManagedFields is the transform of every cached object.
var stripManagedFields = cache.TransformStripManagedFields()

// manifestWorkGVK is ManifestWork's group, version and kind.
var manifestWorkGVK = workv1.GroupVersion.WithKind("ManifestWork")

// Transform is the transform of every object the manager caches: it drops
// managedFields, which the operator never reads, of ManifestWorks what
// TransformManifestWork drops, and of teardown records their content.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		// A teardown record's content is read live, once per teardown and
		// process; should the cache ever hold ConfigMaps whole, it keeps
		// a record's labels and annotations only.
		if record.IsRecord(o) {
			o.Data, o.BinaryData = nil, nil
		}
	case *workv1.ManifestWork:
		return TransformManifestWork(o)
	case *unstructured.Unstructured:
		if o.GroupVersionKind() == manifestWorkGVK {
			return TransformManifestWork(o)
		}
	}
	return stripManagedFields(obj)
}

// TransformManifestWork is the cache transform of ManifestWorks: it drops
// what no decision reads, and what `work` in an orphaning rule is typed
// without (cel.UncachedManifestFields):
//
//   - metadata.managedFields, as for every cached object;
//   - the work agent's conditions and status feedback of each manifest in
//     status.resourceStatus.manifests, most of an applied work's status;
//   - of each manifest in spec.workload.manifests, all but its identity
//     (snapshot.CompactManifest: apiVersion, kind, metadata.name and
//     metadata.namespace), which names an orphaned manifest. An orphaning
//     rule that reads more (cel.Policy.ReadsManifests) is evaluated on the
//     manifests read from the API server, never on these.
//
// It keeps the metadata, the rest of the spec (the deleteOption),
// status.conditions (the teardown reads Applied and its observedGeneration)
// and each manifest's resourceMeta (the resource an orphaned manifest is
// named by). It changes the object in place, as cache transforms may, typed
// or unstructured. Typed, its shared strings share their bytes (internWork).
func TransformManifestWork(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	switch w := obj.(type) {
	case *workv1.ManifestWork:
		internWork(w)
		for i := range w.Spec.Workload.Manifests {
			m := &w.Spec.Workload.Manifests[i]
			m.Raw, m.Object = snapshot.CompactManifest(m.Raw), nil
		}
		for i := range w.Status.ResourceStatus.Manifests {
			m := &w.Status.ResourceStatus.Manifests[i]
			m.Conditions = nil
			m.StatusFeedbacks = workv1.StatusFeedbackResult{}
		}
	case *unstructured.Unstructured:
		if workload, ok, _ := unstructured.NestedSlice(w.Object, "spec", "workload", "manifests"); ok {
			for i, m := range workload {
				if m, ok := m.(map[string]any); ok {
					workload[i] = snapshot.CompactManifestObject(m)
				}
			}
			_ = unstructured.SetNestedSlice(w.Object, workload, "spec", "workload", "manifests")
		}
		manifests, ok, _ := unstructured.NestedSlice(w.Object, "status", "resourceStatus", "manifests")
		if !ok {
			break
		}
		for _, m := range manifests {
			if m, ok := m.(map[string]any); ok {
				for _, f := range cel.UncachedManifestFields {
					delete(m, f)
				}
			}
		}
		_ = unstructured.SetNestedSlice(w.Object, manifests, "status", "resourceStatus", "manifests")
	}
	return obj, nil
}

var (
	_ toolscache.TransformFunc = Transform
	_ toolscache.TransformFunc = TransformManifestWork
)

// internWork makes the strings of a work that many works hold the same
// (its apiVersion and kind, namespace, finalizers, the keys and values of
// its labels and annotations, its conditions' type, status and reason)
// share their bytes (sharedStrings): decoded, every work holds its own,
// and at 200,000 works the copies of the work agent's finalizer and of the
// kind alone were 25 MB.
func internWork(w *workv1.ManifestWork) {
	w.APIVersion, w.Kind, w.Namespace = intern(w.APIVersion), intern(w.Kind), intern(w.Namespace)
	for i := range w.Finalizers {
		w.Finalizers[i] = intern(w.Finalizers[i])
	}
	w.Labels, w.Annotations = internMap(w.Labels), internMap(w.Annotations)
	for i := range w.Status.Conditions {
		c := &w.Status.Conditions[i]
		c.Type, c.Status, c.Reason = intern(c.Type), metav1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
	}
}

func intern(s string) string { return sharedStrings.share(s) }

func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}
