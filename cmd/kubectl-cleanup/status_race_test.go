package main

import (
	"context"
	"slices"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
)

// checkStatusOfVanishingCluster: a cluster whose cleanup ends while status
// reads it (listed deleting, gone when its plan reads it) has left the
// cleanups in progress; status lists the others and does not fail.
func checkStatusOfVanishingCluster(ctx context.Context, g *WithT, cfg *rest.Config) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: operator.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"ending", "going-on"} {
		g.Expect(createCluster(ctx, c, name, v1alpha1.ClusterCleanupFinalizer)).To(Succeed())
		g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", name))).To(Succeed())
	}
	// The operator removes its finalizer between the list and the plan.
	ends := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, w client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == "ending" {
				patch := `{"metadata":{"finalizers":null}}`
				g.Expect(client.IgnoreNotFound(patchMeta(ctx, w, managedClusterGVK, key, patch))).To(Succeed())
			}
			return w.Get(ctx, key, obj, opts...)
		},
	})
	p, err := newPreview(ctx, ends, c.RESTMapper(), settings.Defaults("ops"), "")
	g.Expect(err).NotTo(HaveOccurred())
	got, err := p.status(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	names := []string{}
	for _, s := range got {
		names = append(names, s.Cluster)
	}
	g.Expect(slices.Contains(names, "ending")).To(BeFalse(), "%v", names)
	g.Expect(names).To(ContainElement("going-on"))
	g.Expect(patchMeta(ctx, c, managedClusterGVK, client.ObjectKey{Name: "going-on"}, `{"metadata":{"finalizers":null}}`)).To(Succeed())
}
