package snapshot_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// TestReadTakesWhatTheTeardownDecides reads a cluster from a real API
// server as the preview does: the namespace whole (keepNamespace may read
// its status), the works whole, the monitored objects as metadata, a
// monitored resource the API server does not serve as such, and who owns
// the work named like the signal work. A held cluster's snapshot holds
// nothing but the cluster.
func TestReadTakesWhatTheTeardownDecides(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := k8s

	cluster := snapshot.NewManagedCluster()
	cluster.SetName("r1")
	g.Expect(c.Create(ctx, cluster)).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "r1", Labels: map[string]string{"keep": "true"}}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hold", Namespace: "r1"}})).To(Succeed())
	manifest := runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"}}`)}
	for _, w := range []*workv1.ManifestWork{
		{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "r1"}},
		// Named like the signal work, without the operator's label.
		{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-signal", Namespace: "r1", Labels: map[string]string{v1alpha1.SignalWorkLabel: "true"}}},
	} {
		w.Spec.Workload.Manifests = []workv1.Manifest{{RawExtension: manifest}}
		g.Expect(c.Create(ctx, w)).To(Succeed())
	}

	env2, err := cel.NewEnv(cel.Schemas{})
	g.Expect(err).NotTo(HaveOccurred())
	unserved := schema.GroupVersionResource{Group: "nowhere.example.com", Version: "v1", Resource: "widgets"}
	p, errs := cel.Compile(env2, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		MonitoredResources: []v1alpha1.MonitoredResource{
			{GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
			{GroupVersionResource: v1alpha1.GroupVersionResource{Group: unserved.Group, Version: unserved.Version, Resource: unserved.Resource}},
		},
		DeletionSignal: &v1alpha1.DeletionSignal{},
	}})
	g.Expect(errs).To(BeEmpty())
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "r1"}, cluster)).To(Succeed())
	gov := &decision.Governed{Cluster: cluster, Policy: p}

	r := &snapshot.Reader{Client: c, Mapper: c.RESTMapper(), APIReader: c}
	s, err := r.Read(ctx, gov, decision.Memory{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Cluster.GetName()).To(Equal("r1"))
	g.Expect(s.Namespace).NotTo(BeNil())
	g.Expect(s.Namespace.Labels).To(HaveKeyWithValue("keep", "true"))
	g.Expect(s.Namespace.Status.Phase).To(Equal(corev1.NamespaceActive), "the namespace is read whole")
	g.Expect(s.Works).To(HaveLen(2))
	for _, w := range s.Works {
		g.Expect(w.Spec.Workload.Manifests).To(HaveLen(1), "the works are read whole")
	}
	var works, configMaps []string
	for _, o := range s.Objects[decision.ManifestWorks] {
		works = append(works, o.Key())
	}
	for _, o := range s.Objects[schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}] {
		configMaps = append(configMaps, o.Key())
		value, err := o.CELValue()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(value).To(HaveKey("metadata"), "a when filter reads the object's metadata")
	}
	g.Expect(works).To(ConsistOf("manifestworks/app", "manifestworks/cleanup-signal"))
	g.Expect(configMaps).To(ContainElement("configmaps/hold"))
	g.Expect(s.Unserved).To(Equal(map[schema.GroupVersionResource]bool{unserved: true}))
	g.Expect(s.SignalOwned).To(BeFalse(), "a look-alike signal work is not the operator's")
	g.Expect(s.ResourceOf(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})).To(Equal("configmaps"))

	// The operator's own signal work.
	w := &workv1.ManifestWork{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "r1", Name: "cleanup-signal"}, w)).To(Succeed())
	w.Labels[v1alpha1.ManagedByLabel] = v1alpha1.ManagedBy
	g.Expect(c.Update(ctx, w)).To(Succeed())
	s, err = r.Read(ctx, gov, decision.Memory{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.SignalOwned).To(BeTrue())

	// A held cluster: nothing is read for a decision nobody may take.
	held := &decision.Governed{Cluster: cluster, Held: context.Canceled}
	s, err = r.Read(ctx, held, decision.Memory{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Namespace).To(BeNil())
	g.Expect(s.Objects).To(BeEmpty())
}
