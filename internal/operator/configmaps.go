package operator

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// OwnConfigMapsCache returns the cache options of the operator's own
// ConfigMaps: every ConfigMap of its namespace (the teardown records, and a
// cleanup-decisions ConfigMap there), and in every other namespace only
// those named cleanup-decisions. The API server authorizes the field
// selector metadata.name=cleanup-decisions against the resource name its
// role names, so the operator needs no right on any other ConfigMap of the
// hub, and records need one only in its namespace.
func OwnConfigMapsCache(namespace string) cache.Options {
	return cache.Options{
		DefaultTransform: Transform,
		ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
			namespace:           {},
			cache.AllNamespaces: {FieldSelector: fields.OneTermEqualSelector("metadata.name", v1alpha1.DecisionsConfigMap)},
		}}},
	}
}

// newOwnConfigMaps adds to the manager a cluster whose client reads the
// operator's own ConfigMaps from a cache of them alone (OwnConfigMapsCache)
// and writes them as the manager's client does. It is apart from the
// manager's cache, which keeps every object of a kind: a deletion stage
// or a monitored resource of ConfigMaps (granted to the operator on
// purpose) must see every ConfigMap of a cluster namespace, and one
// cache holds one view of a kind.
func newOwnConfigMaps(mgr manager.Manager, namespace string) (client.Client, cache.Cache, error) {
	c, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.HTTPClient = mgr.GetHTTPClient()
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
		o.Cache = OwnConfigMapsCache(namespace)
		o.Client = client.Options{FieldOwner: v1alpha1.FieldManager}
		o.Logger = mgr.GetLogger().WithName("own-configmaps")
	})
	if err != nil {
		return nil, nil, fmt.Errorf("setting up the cache of the operator's ConfigMaps: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, nil, err
	}
	return c.GetClient(), c.GetCache(), nil
}
