package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// BenchmarkOrphaningPolicyChange holds 2,000 ManifestWorks across 100
// clusters. One policy change makes the orphaning rules match half of them;
// it reports the time until all of them carry the decision, the writes the
// operator made (expected: exactly the affected works), its heap, and the
// writes it makes in the idle seconds after (expected: none). IDLE_SECONDS
// sets the idle time (default 60).
func BenchmarkOrphaningPolicyChange(b *testing.B) {
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, c, writes := startOperator(ctx, b)
	defer func() { _ = env.Stop() }()

	const clusters, perCluster = 100, 20
	createFleet(ctx, b, c, clusters, perCluster)
	p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "orphaning"}, Spec: v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		Orphaning:      []v1alpha1.OrphaningRule{{Name: "keep", When: "work.metadata.labels[?'keep'].orValue('') == 'yes'"}},
	}}
	must(b, c.Create(ctx, p))
	waitQuiet(b, writes)

	for i := 0; i < b.N; i++ {
		writes.reset()
		before := p.DeepCopy()
		// Alternately the rule matches the tier-a half of the works, and
		// none: each change affects exactly half of them.
		want := clusters * perCluster / 2
		p.Spec.Orphaning[0].When = "work.metadata.labels[?'tier'].orValue('') == 'a'"
		if i%2 == 1 {
			p.Spec.Orphaning[0].When = "work.metadata.labels[?'keep'].orValue('') == 'yes'"
			want = 0
		}
		start := time.Now()
		must(b, c.Patch(ctx, p, client.MergeFrom(before)))
		waitStamped(ctx, b, c, "a", want)
		converge := time.Since(start)
		waitQuiet(b, writes)
		counts := writes.reset()
		b.ReportMetric(converge.Seconds(), "converge-s")
		b.ReportMetric(float64(counts["PATCH manifestworks"]), "work-writes")
		b.ReportMetric(float64(total(counts)), "all-writes")
		b.ReportMetric(heapMiB(), "heap-MiB")
		b.Logf("writes for the change: %v", counts)
	}

	idle := 60
	if s, err := strconv.Atoi(os.Getenv("IDLE_SECONDS")); err == nil {
		idle = s
	}
	writes.reset()
	time.Sleep(time.Duration(idle) * time.Second)
	b.ReportMetric(float64(total(writes.reset())), "idle-writes")
}

// BenchmarkFleetMemory starts the operator on 3,000 ManagedClusters and
// 30,000 ManifestWorks and reports its peak heap while it caches and
// governs them, and its heap once settled (target: under 200 MiB).
func BenchmarkFleetMemory(b *testing.B) {
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start()
	must(b, err)
	defer func() { _ = env.Stop() }()
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	must(b, err)
	createFleet(ctx, b, c, 3000, 10)
	runtime.GC()
	base := heapMiB()

	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	})
	writes := &writeCounter{counts: map[string]int{}}
	opts := env.ManagerOptions(operator.ManagerOptions())
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(writes.wrap(env.Config), opts)
	must(b, err)
	_, err = operator.Setup(ctx, mgr, operator.Options{EnableWebhooks: true})
	must(b, err)
	start := time.Now()
	go func() { _ = mgr.Start(ctx) }()
	must(b, env.WaitForWebhook(ctx))
	must(b, c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}, Spec: v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		Orphaning:      []v1alpha1.OrphaningRule{{Name: "keep", When: "work.metadata.labels[?'keep'].orValue('') == 'yes'"}},
	}}))
	waitGovernedCount(ctx, b, c, 3000)
	waitQuiet(b, writes)
	settle := time.Since(start)
	close(stop)
	wg.Wait()
	runtime.GC()
	b.ReportMetric(float64(peak.Load())/(1<<20)-base, "peak-heap-MiB")
	b.ReportMetric(heapMiB()-base, "settled-heap-MiB")
	b.ReportMetric(settle.Seconds(), "settle-s")
	b.Logf("heap before the operator started (the test's own): %.0f MiB; writes: %v", base, writes.reset())
}

func startOperator(ctx context.Context, b *testing.B) (*testenv.Env, client.Client, *writeCounter) {
	env, err := testenv.Start()
	must(b, err)
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	must(b, err)
	writes := &writeCounter{counts: map[string]int{}}
	opts := env.ManagerOptions(operator.ManagerOptions())
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(writes.wrap(env.Config), opts)
	must(b, err)
	_, err = operator.Setup(ctx, mgr, operator.Options{EnableWebhooks: true})
	must(b, err)
	go func() { _ = mgr.Start(ctx) }()
	must(b, env.WaitForWebhook(ctx))
	return env, c, writes
}

// createFleet creates clusters with their namespaces and works; half the
// works of each cluster are tier a, half tier b.
func createFleet(ctx context.Context, b *testing.B, c client.Client, clusters, perCluster int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range clusters {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fmt.Sprintf("fleet-%04d", i)
			mc := cluster(name)
			_ = unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient")
			must(b, c.Create(ctx, mc))
			must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{decision.OCMClusterNameLabel: name}}}))
			for j := range perCluster {
				w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"workload": map[string]any{"manifests": []any{
					map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": fmt.Sprint("cm-", j), "namespace": "default"},
						"data": map[string]any{"key": "value"}},
				}}}}}
				w.SetGroupVersionKind(workGVK)
				w.SetNamespace(name)
				w.SetName(fmt.Sprintf("work-%03d", j))
				w.SetLabels(map[string]string{"tier": []string{"a", "b"}[j%2]})
				must(b, c.Create(ctx, w))
			}
		})
	}
	wg.Wait()
}

// waitStamped waits until n works of the tier carry deleteOption Orphan.
func waitStamped(ctx context.Context, b *testing.B, c client.Client, tier string, n int) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(workGVK.GroupVersion().WithKind("ManifestWorkList"))
		must(b, c.List(ctx, list, client.MatchingLabels{"tier": tier}))
		stamped := 0
		for _, w := range list.Items {
			if p, _, _ := unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy"); p == "Orphan" {
				stamped++
			}
		}
		if stamped == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("the %s works were not stamped in time", tier)
}

// waitGovernedCount polls metadata only, and seldom: the harness shares the
// process, and its own garbage must not count as the operator's.
func waitGovernedCount(ctx context.Context, b *testing.B, c client.Client, n int) {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedClusterList"})
		must(b, c.List(ctx, list))
		governed := 0
		for _, mc := range list.Items {
			if mc.Annotations[v1alpha1.GoverningPolicyAnnotation] != "" {
				governed++
			}
		}
		if governed == n {
			return
		}
		time.Sleep(2 * time.Second)
	}
	b.Fatalf("%d clusters not governed in time", n)
}

// waitQuiet waits until the operator made no write for two seconds.
func waitQuiet(b *testing.B, w *writeCounter) {
	last, quietSince := -1, time.Now()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		n := total(w.counts)
		w.mu.Unlock()
		if n != last {
			last, quietSince = n, time.Now()
		}
		if time.Since(quietSince) > 2*time.Second {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("the operator did not settle")
}

func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}
