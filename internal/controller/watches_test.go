package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

var _ = Describe("Watching what teardowns list", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	watched := func() map[string]float64 { return series(op.Metrics.WatchedResources) }

	// The first teardown after a start used to start the informers of its
	// stage and monitored resources, and wait for them to list the hub,
	// before its first write.
	It("watches a policy's stage and monitored resources from when it governs a cluster, before any is deleted", func() {
		podTemplates := `cleanup_watched_resources{resource=podtemplates}`
		Expect(watched()).NotTo(HaveKey(podTemplates))
		Expect(watched()).To(HaveKeyWithValue(`cleanup_watched_resources{resource=manifestworks.work.open-cluster-management.io}`, 1.0))

		fleetCluster("watch-1", map[string]string{"env": "watch-1"}, true)
		Expect(k8s.Create(ctx, cleanupPolicy("watch-1", v1alpha1.CleanupPolicySpec{
			ClusterSelector:    "cluster.metadata.labels[?'env'].orValue('') == 'watch-1'",
			MonitoredResources: monitors("", "v1", "podtemplates"),
		}))).To(Succeed())
		governedBy("watch-1", "watch-1")

		Eventually(watched).Should(And(
			HaveKeyWithValue(podTemplates, 1.0),
			HaveKeyWithValue(`cleanup_watched_resources{resource=managedclusteraddons.addon.open-cluster-management.io}`, 1.0)))
		Expect(getClusterNow("watch-1").GetDeletionTimestamp()).To(BeNil(), "no cluster was deleted")
	})

	It("does not watch a cluster-scoped resource a policy monitors: a teardown never lists one", func() {
		fleetCluster("watch-2", map[string]string{"env": "watch-2"}, true)
		Expect(k8s.Create(ctx, cleanupPolicy("watch-2", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'watch-2'",
			MonitoredResources: []v1alpha1.MonitoredResource{
				{GroupVersionResource: v1alpha1.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}},
				{GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "limitranges"}},
			},
		}))).To(Succeed())
		governedBy("watch-2", "watch-2")
		Eventually(watched).Should(HaveKeyWithValue(`cleanup_watched_resources{resource=limitranges}`, 1.0))
		Expect(watched()).NotTo(HaveKey(`cleanup_watched_resources{resource=clusterrolebindings.rbac.authorization.k8s.io}`))
	})
})
