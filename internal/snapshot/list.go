package snapshot

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// MapperLister lists from a reader, through a REST mapper that says which
// resources the API server serves: the preview's Lister.
type MapperLister struct {
	Reader client.Reader
	Mapper meta.RESTMapper
}

// List implements Lister.
func (l MapperLister) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]metav1.PartialObjectMetadata, bool, error) {
	gvk, err := l.Mapper.KindFor(gvr)
	switch {
	case meta.IsNoMatchError(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("mapping %s: %w", gvr, err)
	}
	items, err := ListMetadata(ctx, l.Reader, gvk, namespace)
	return items, true, err
}

// ScopeOf says, through a REST mapper, how the API server serves a
// resource: not at all, cluster-scoped, or namespaced. The mapper asks the
// API server again for a group version it did not know, so a CRD installed
// later is found.
func ScopeOf(mapper meta.RESTMapper, gvr schema.GroupVersionResource) (decision.Scope, error) {
	gvk, err := mapper.KindFor(gvr)
	if err == nil {
		var m *meta.RESTMapping
		if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			if m.Scope.Name() == meta.RESTScopeNameRoot {
				return decision.ClusterScoped, nil
			}
			return decision.Namespaced, nil
		}
	}
	if meta.IsNoMatchError(err) {
		return decision.NotServed, nil
	}
	return decision.NotServed, fmt.Errorf("mapping %s: %w", gvr, err)
}

// ListMetadata lists the metadata of a kind's objects in a namespace.
func ListMetadata(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, namespace string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", gvk.Kind, namespace, err)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return list.Items, nil
}
