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
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestReviewClusterScopedResourceReadAlike: nothing refuses a cluster-scoped
// resource as a monitored resource or a stage. The preview lists it with a
// live client, which drops the namespace of a cluster-scoped list (every
// object of the hub); the operator lists it from its cache, whose namespace
// index holds no cluster-scoped object (none). Same PlanTeardown, different
// inputs: `kubectl cleanup plan` says the gate waits, the operator goes
// through it and deletes the stages.
func TestReviewClusterScopedResourceReadAlike(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	env, err := testenv.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()
	defer cancel() // the cache's watches end before the API server stops
	live, err := client.New(env.Config, client.Options{Scheme: scheme.New()})
	g.Expect(err).NotTo(HaveOccurred())

	cluster := snapshot.NewManagedCluster()
	cluster.SetName("r1")
	g.Expect(live.Create(ctx, cluster)).To(Succeed())
	g.Expect(live.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "r1"}})).To(Succeed())
	g.Expect(live.Get(ctx, client.ObjectKey{Name: "r1"}, cluster)).To(Succeed())

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

	gate := func(s *decision.Snapshot) decision.StepState {
		for _, st := range decision.PlanTeardown(gov(), s).Steps {
			if st.Kind == decision.StepGate {
				return st.State
			}
		}
		return ""
	}
	t.Logf("preview lists %d managedclusters, gate %s; operator lists %d, gate %s",
		len(ps.Objects[clusters]), gate(ps), len(os.Objects[clusters]), gate(os))
	g.Expect(len(os.Objects[clusters])).To(Equal(len(ps.Objects[clusters])), "the preview and the operator read the same objects")
}
