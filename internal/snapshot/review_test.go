package snapshot_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// TestReviewClusterScopedResourceReadAlike: a cluster-scoped resource as a
// monitored resource (or a stage) has no objects in the cluster namespace.
// Listed, the preview's live client would drop the namespace (every object
// of the hub) and the operator's cache would find none: the preview would
// say the gate waits while the operator went through it. Neither lists it:
// both hold the gate, naming the field.
func TestReviewClusterScopedResourceReadAlike(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the cache's watches end before the API server stops
	live := k8s

	cluster := snapshot.NewManagedCluster()
	cluster.SetName("v1")
	g.Expect(live.Create(ctx, cluster)).To(Succeed())
	g.Expect(live.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "v1"}})).To(Succeed())
	g.Expect(live.Get(ctx, client.ObjectKey{Name: "v1"}, cluster)).To(Succeed())

	env2, err := cel.NewEnv(cel.Schemas{})
	g.Expect(err).NotTo(HaveOccurred())
	clusters := schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}
	p, errs := cel.Compile(env2, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		MonitoredResources: []v1alpha1.MonitoredResource{{GroupVersionResource: v1alpha1.GroupVersionResource{
			Group: clusters.Group, Version: clusters.Version, Resource: clusters.Resource}}},
	}})
	g.Expect(errs).To(BeEmpty())
	gov := func() *decision.Governed {
		return &decision.Governed{Cluster: cluster, Policy: p, Activation: p.Bind(ctx, cel.NewBudget(cel.ReconcileCostBudget), cluster.Object)}
	}

	// The preview: a live client.
	preview := &snapshot.Reader{Client: live, Mapper: live.RESTMapper(), APIReader: live}
	ps, err := preview.Read(ctx, gov(), decision.Memory{})
	g.Expect(err).NotTo(HaveOccurred())

	// The operator: the same reader over a cache.
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New(), Mapper: live.RESTMapper()})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	cached, err := client.New(env.Config, client.Options{Scheme: scheme.New(), Cache: &client.CacheOptions{Reader: c}})
	g.Expect(err).NotTo(HaveOccurred())
	syncCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	g.Expect(c.WaitForCacheSync(syncCtx)).To(BeTrue())
	operator := &snapshot.Reader{Client: cached, Mapper: live.RESTMapper(), APIReader: live}
	os, err := operator.Read(ctx, gov(), decision.Memory{})
	g.Expect(err).NotTo(HaveOccurred())

	gate := func(s *decision.Snapshot) decision.Step {
		for _, st := range decision.PlanTeardown(gov(), s).Steps {
			if st.Kind == decision.StepGate {
				return st
			}
		}
		return decision.Step{}
	}
	pg, og := gate(ps), gate(os)
	t.Logf("preview lists %d managedclusters, gate %s; operator lists %d, gate %s",
		len(ps.Objects[clusters]), pg.State, len(os.Objects[clusters]), og.State)
	for _, side := range []struct {
		name string
		s    *decision.Snapshot
		gate decision.Step
	}{{"preview", ps, pg}, {"operator", os, og}} {
		// Never read as empty, never listed hub-wide: refused, and the
		// gate holds, naming the field.
		g.Expect(side.s.ClusterScoped[clusters]).To(BeTrue(), side.name)
		g.Expect(side.s.Objects).NotTo(HaveKey(clusters), side.name)
		g.Expect(side.gate.Actions).To(HaveLen(1), side.name)
		g.Expect(side.gate.Actions[0].Verb).To(Equal(decision.VerbHold), side.name)
		g.Expect(side.gate.Actions[0].For).To(ContainSubstring("spec.monitoredResources[0]: resource managedclusters.cluster.open-cluster-management.io/v1 is cluster-scoped"), side.name)
	}
	g.Expect(og).To(Equal(pg), "the preview and the operator plan the gate alike")
}
