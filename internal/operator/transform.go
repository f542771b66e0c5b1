package operator

import (
	corev1 "k8s.io/api/core/v1"
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
// or unstructured.
func TransformManifestWork(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	switch w := obj.(type) {
	case *workv1.ManifestWork:
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
