package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// agentDelay is how long the simulated work agent takes to remove its
// finalizer once a work starts deleting.
const agentDelay = 300 * time.Millisecond

var (
	workGVK  = schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork"}
	addonGVK = schema.GroupVersionKind{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Kind: "ManagedClusterAddOn"}
)

// BenchmarkTeardownOneCluster deletes one ManagedCluster holding 10 add-ons
// and 500 ManifestWorks in three stages, with a simulated work agent, and
// compares the operator with a bare client loop deleting the same objects in
// the same order.
func BenchmarkTeardownOneCluster(b *testing.B) {
	runTeardown(b, teardownCase{clusters: 1, addons: 10, works: 500, staged: true})
}

// BenchmarkTeardownTwentyClusters deletes 20 ManagedClusters of 2 add-ons
// and 100 ManifestWorks each at once.
func BenchmarkTeardownTwentyClusters(b *testing.B) {
	runTeardown(b, teardownCase{clusters: 20, addons: 2, works: 100})
}

type teardownCase struct {
	clusters, addons, works int
	// staged splits the works into two stages by a label, after the add-ons.
	staged bool
}

// writeCounter counts the write requests made through a transport, by
// verb and resource.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *writeCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodGet {
				w.add(r.Method + " " + resourceOf(r.URL.Path))
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

func (w *writeCounter) add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[key]++
}

func (w *writeCounter) reset() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.counts
	w.counts = map[string]int{}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceOf names the resource of an API path, with its subresource.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		switch parts[i] {
		case "status":
			return parts[i-2] + "/status"
		case "manifestworks", "managedclusteraddons", "managedclusters", "namespaces", "events", "leases":
			if i == 0 || parts[i-1] != "namespaces" || parts[i] == "namespaces" {
				return parts[i]
			}
		}
	}
	return path
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func runTeardown(b *testing.B, tc teardownCase) {
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := testenv.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	startAgent(ctx, b, env.Config)

	opWrites := &writeCounter{counts: map[string]int{}}
	opts := env.ManagerOptions(operator.ManagerOptions())
	opts.Controller.SkipNameValidation = ptr.To(true) // one manager per benchmark, in one process
	mgr, err := ctrl.NewManager(opWrites.wrap(env.Config), opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := operator.Setup(ctx, mgr, operator.Options{EnableWebhooks: true}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	if err := env.WaitForWebhook(ctx); err != nil {
		b.Fatal(err)
	}
	spec := v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}}
	if tc.staged {
		works := v1alpha1.GroupVersionResource{Group: workGVK.Group, Version: workGVK.Version, Resource: "manifestworks"}
		spec.DeletionStages = []v1alpha1.DeletionStage{
			{Name: "addons", GroupVersionResource: v1alpha1.GroupVersionResource{Group: addonGVK.Group, Version: addonGVK.Version, Resource: "managedclusteraddons"}},
			{Name: "apps", GroupVersionResource: works, When: "object.metadata.labels[?'tier'].orValue('') == 'app'"},
			{Name: "infra", GroupVersionResource: works},
		}
	}
	if err := c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: spec}); err != nil {
		b.Fatal(err)
	}

	bareWrites := &writeCounter{counts: map[string]int{}}
	bare, err := client.New(bareWrites.wrap(env.Config), client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}

	var opTime, bareTime time.Duration
	var opCount, bareCount map[string]int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		names := populate(ctx, b, c, tc, fmt.Sprintf("op%d", i))
		waitGoverned(ctx, b, c, names)
		opWrites.reset()
		b.StartTimer()
		start := time.Now()
		for _, n := range names {
			if err := c.Delete(ctx, cluster(n)); err != nil {
				b.Fatal(err)
			}
		}
		waitGone(ctx, b, c, names)
		opTime += time.Since(start)
		b.StopTimer()
		opCount = opWrites.reset()

		names = populate(ctx, b, c, tc, fmt.Sprintf("bare%d", i))
		bareWrites.reset()
		start = time.Now()
		var wg sync.WaitGroup
		for _, n := range names {
			wg.Go(func() { bareLoop(ctx, b, bare, c, n, tc.staged) })
		}
		wg.Wait()
		bareTime += time.Since(start)
		bareCount = bareWrites.reset()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(opTime.Seconds()/float64(b.N), "operator-s/op")
	b.ReportMetric(bareTime.Seconds()/float64(b.N), "bare-loop-s/op")
	b.ReportMetric(opTime.Seconds()/bareTime.Seconds(), "ratio")
	b.ReportMetric(float64(total(opCount)), "operator-writes")
	b.ReportMetric(float64(total(bareCount)), "bare-writes")
	b.Logf("operator writes (last run): %v", opCount)
	b.Logf("bare loop writes (last run): %v", bareCount)
}

func cluster(name string) *unstructured.Unstructured {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
	mc.SetKind("ManagedCluster")
	mc.SetName(name)
	return mc
}

// populate creates the clusters with their namespaces, add-ons and works;
// works carry the agent's finalizer, as once the agent applied them.
func populate(ctx context.Context, b *testing.B, c client.Client, tc teardownCase, prefix string) []string {
	var names []string
	for i := range tc.clusters {
		name := fmt.Sprintf("%s-c%02d", prefix, i)
		names = append(names, name)
		mc := cluster(name)
		_ = unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient")
		must(b, c.Create(ctx, mc))
		must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{decision.OCMClusterNameLabel: name}}}))
		for j := range tc.addons {
			a := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
			a.SetGroupVersionKind(addonGVK)
			a.SetNamespace(name)
			a.SetName(fmt.Sprintf("addon-%02d", j))
			must(b, c.Create(ctx, a))
		}
		for j := range tc.works {
			w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"workload": map[string]any{"manifests": []any{
				map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": fmt.Sprint("cm-", j), "namespace": "default"}},
			}}}}}
			w.SetGroupVersionKind(workGVK)
			w.SetNamespace(name)
			w.SetName(fmt.Sprintf("work-%03d", j))
			w.SetFinalizers([]string{v1alpha1.WorkAgentFinalizer})
			if j%2 == 0 {
				w.SetLabels(map[string]string{"tier": "app"})
			}
			must(b, c.Create(ctx, w))
		}
	}
	return names
}

// bareLoop deletes what the operator deletes, in the same order, with
// nothing else: each stage's objects, waiting until they are gone, then the
// namespace.
func bareLoop(ctx context.Context, b *testing.B, bare, reader client.Client, ns string, staged bool) {
	stages := [][]schema.GroupVersionKind{{addonGVK}, {workGVK}}
	filters := []func(metav1.Object) bool{nil, nil}
	if staged {
		stages = [][]schema.GroupVersionKind{{addonGVK}, {workGVK}, {workGVK}}
		app := func(o metav1.Object) bool { return o.GetLabels()["tier"] == "app" }
		filters = []func(metav1.Object) bool{nil, app, nil}
	}
	for i, gvks := range stages {
		var pending []types.NamespacedName
		for _, gvk := range gvks {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			must(b, reader.List(ctx, list, client.InNamespace(ns)))
			for j := range list.Items {
				o := &list.Items[j]
				if filters[i] != nil && !filters[i](o) {
					continue
				}
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(gvk)
				u.SetNamespace(ns)
				u.SetName(o.Name)
				if err := bare.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
					b.Fatal(err)
				}
				pending = append(pending, types.NamespacedName{Namespace: ns, Name: o.Name})
			}
			for _, key := range pending {
				for {
					u := &metav1.PartialObjectMetadata{}
					u.SetGroupVersionKind(gvk)
					if apierrors.IsNotFound(reader.Get(ctx, key, u)) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}
	}
	must(b, client.IgnoreNotFound(bare.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
}

func waitGoverned(ctx context.Context, b *testing.B, c client.Client, names []string) {
	for _, n := range names {
		for {
			mc := cluster(n)
			must(b, c.Get(ctx, client.ObjectKey{Name: n}, mc))
			if slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func waitGone(ctx context.Context, b *testing.B, c client.Client, names []string) {
	deadline := time.Now().Add(5 * time.Minute)
	for _, n := range names {
		for !apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: n}, cluster(n))) {
			if time.Now().After(deadline) {
				b.Fatalf("cluster %s not gone in time", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// startAgent runs a simulated work agent: it removes its finalizer from a
// work agentDelay after the work starts deleting.
func startAgent(ctx context.Context, b *testing.B, cfg *rest.Config) {
	agentCache, err := cache.New(cfg, cache.Options{Scheme: operator.NewScheme()})
	must(b, err)
	agentClient, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
	must(b, err)
	w := &metav1.PartialObjectMetadata{}
	w.SetGroupVersionKind(workGVK)
	inf, err := agentCache.GetInformer(ctx, w)
	must(b, err)
	var scheduled sync.Map
	var inflight atomic.Int64
	handle := func(obj any) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok || m.DeletionTimestamp == nil || !slices.Contains(m.Finalizers, v1alpha1.WorkAgentFinalizer) {
			return
		}
		if _, loaded := scheduled.LoadOrStore(m.UID, true); loaded {
			return
		}
		inflight.Add(1)
		time.AfterFunc(agentDelay, func() {
			defer inflight.Add(-1)
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(workGVK)
			u.SetNamespace(m.Namespace)
			u.SetName(m.Name)
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			_ = agentClient.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
		})
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, n any) { handle(n) },
	})
	must(b, err)
	go func() { _ = agentCache.Start(ctx) }()
	agentCache.WaitForCacheSync(ctx)
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
