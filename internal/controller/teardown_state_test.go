package controller_test

import (
	"fmt"
	"os"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// stateClusters is how many clusters the teardown-state spec tears down
// each way: CLEANUP_STATE_CLUSTERS, else 3.
func stateClusters() int {
	if n, err := strconv.Atoi(os.Getenv("CLEANUP_STATE_CLUSTERS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// teardownWays are the ways a teardown ends.
var teardownWays = []string{"op", "hand", "gone", "dry", "rel"}

// heldTeardowns makes n clusters of a way, each with a ConfigMap its
// policy monitors, so that their teardowns begin and wait for it, then
// deletes them and waits until each teardown reported its first step.
func heldTeardowns(way string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("st-%s-%d", way, i)
		fleetCluster(names[i], map[string]string{"way": way}, true)
		Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: names[i],
			Labels: map[string]string{"app": "shop"}}})).To(Succeed())
		if way == "hand" {
			// Another controller's finalizer keeps the cluster readable
			// once the operator's is removed by hand.
			mc := getClusterNow(names[i])
			mc.SetFinalizers(append(mc.GetFinalizers(), "example.com/hold"))
			Expect(k8s.Update(ctx, mc)).To(Succeed())
		}
	}
	p := cleanupPolicy("st-"+way, v1alpha1.CleanupPolicySpec{
		ClusterSelector: fmt.Sprintf("cluster.metadata.labels[?'way'].orValue('') == '%s'", way),
		DryRun:          way == "dry",
		MonitoredResources: []v1alpha1.MonitoredResource{{
			GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			When:                 "object.metadata.labels[?'app'].hasValue()",
		}},
	})
	Expect(k8s.Create(ctx, p)).To(Succeed())
	for _, name := range names {
		governedBy(name, p.Name)
		deleteCluster(name)
	}
	for _, name := range names {
		Eventually(func(g Gomega) { contentDelete(g, name) }).Should(Succeed())
	}
	return names
}

var _ = Describe("Teardown state", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(60 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("keeps nothing of a cluster once its teardown ended, however it ended", func() {
		n := stateClusters()
		byWay := map[string][]string{}
		var all []string
		for _, way := range teardownWays {
			byWay[way] = heldTeardowns(way, n)
			all = append(all, byWay[way]...)
		}
		Expect(op.Teardown.Kept(all...)).To(ConsistOf(all), "each teardown has begun, and has its state")

		By("the operator finishing: the monitored objects gone")
		for _, name := range byWay["op"] {
			Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: name}})).To(Succeed())
		}
		By("the operator's finalizer removed by hand, the cluster kept by another")
		for _, name := range byWay["hand"] {
			removeFinalizerByHand(getClusterNow(name), v1alpha1.ClusterCleanupFinalizer)
		}
		Eventually(func() []string { return op.Teardown.Kept(byWay["hand"]...) }).Should(BeEmpty(),
			"a finalizer removed by hand ends the teardown while the cluster is still there")
		for _, name := range byWay["hand"] {
			removeFinalizerByHand(getClusterNow(name), "example.com/hold")
		}
		By("the cluster gone: its finalizer removed by hand, a dry run's too")
		for _, name := range append(byWay["gone"], byWay["dry"]...) {
			removeFinalizerByHand(getClusterNow(name), v1alpha1.ClusterCleanupFinalizer)
		}
		By("the cluster released: its policy gone")
		p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "st-rel"}}
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		removeFinalizerByHand(p, v1alpha1.InUseFinalizer)

		for _, name := range all {
			clusterGone(name)
		}
		Eventually(func() []string { return op.Teardown.Kept(all...) }).Should(BeEmpty())
	})
})
