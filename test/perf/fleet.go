package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

const (
	// workAgentFinalizer is the finalizer OCM's work agent puts on the
	// works it applied.
	workAgentFinalizer = "cluster.open-cluster-management.io/manifest-work-cleanup"
	// operatorFinalizer is on every ManagedCluster the operator governs.
	operatorFinalizer = "cleanup.fleetops.dev/cluster-cleanup"
	// ocmGCFinalizer is on every ManagedCluster OCM's gc controller watches.
	ocmGCFinalizer = "cluster.open-cluster-management.io/resource-cleanup"
	// cleanupPriority is OCM's annotation ordering deletions in a cluster
	// namespace, lowest first; the operator honours it too.
	cleanupPriority = "open-cluster-management.io/cleanup-priority"
)

var (
	workGVR  = schema.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
	addonGVR = schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(workv1.Install(s))
	utilruntime.Must(addonv1alpha1.Install(s))
	return s
}

// fleet is the shape of what is created: clusters, each with its namespace,
// add-ons and works. A work holds one ConfigMap manifest with 512 bytes of
// data and the work agent's finalizer, as once the agent applied it.
type fleet struct {
	clusters, addons, works int
	// prioritised gives even works cleanup-priority 10 and odd works 20, so
	// that every contender deletes add-ons, then the even works, then the
	// odd ones.
	prioritised bool
	// inOneCall deletes the clusters with one deletecollection, as a
	// script decommissioning a region would.
	inOneCall bool
}

func (f fleet) String() string {
	s := fmt.Sprintf("%d cluster(s) x (%d add-ons + %d works)", f.clusters, f.addons, f.works)
	if f.prioritised {
		s += ", works in 2 priorities"
	}
	if f.inOneCall {
		s += ", deleted in one call"
	}
	return s
}

func clusterName(i int) string { return fmt.Sprintf("cluster-%05d", i) }

var payload = strings.Repeat("x", 512)

// populate creates the fleet with up to 32 requests in flight.
func populate(ctx context.Context, c client.Client, f fleet) error {
	// Each cluster, then its namespace as OCM's registration hub makes it
	// (after the cluster, labelled with its name: a teardown deletes no
	// other); once every namespace exists, add-ons and works.
	var clusters, content []func() error
	for i := range f.clusters {
		name := clusterName(i)
		clusters = append(clusters, func() error {
			err := c.Create(ctx, &clusterv1.ManagedCluster{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "true"}},
				Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true},
			})
			if err != nil {
				return err
			}
			return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{"open-cluster-management.io/cluster-name": name}}})
		})
		for j := range f.addons {
			content = append(content, func() error {
				return c.Create(ctx, &addonv1alpha1.ManagedClusterAddOn{
					ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("addon-%02d", j)},
				})
			})
		}
		for j := range f.works {
			content = append(content, func() error { return c.Create(ctx, newWork(name, j, f.prioritised)) })
		}
	}
	if err := parallel(clusters); err != nil {
		return fmt.Errorf("creating the fleet: %w", err)
	}
	if err := parallel(content); err != nil {
		return fmt.Errorf("creating the fleet: %w", err)
	}
	return nil
}

// parallel runs the jobs 32 at a time and returns the first error.
func parallel(jobs []func() error) error {
	queue := make(chan func() error)
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range queue {
				if err := job(); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for _, job := range jobs {
		queue <- job
	}
	close(queue)
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

func newWork(ns string, j int, prioritised bool) *workv1.ManifestWork {
	cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"default"},"data":{"payload":%q}}`, j, payload)
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("work-%03d", j), Finalizers: []string{workAgentFinalizer}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(cm)}},
		}}},
	}
	if prioritised {
		prio := "10"
		if j%2 == 1 {
			prio = "20"
		}
		w.Annotations = map[string]string{cleanupPriority: prio}
	}
	return w
}

// clusterFinalizers lists the finalizers of the fleet's clusters, by name.
func clusterFinalizers(ctx context.Context, c client.Client) (map[string][]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ManagedClusterList"))
	if err := c.List(ctx, list); err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(list.Items))
	for _, item := range list.Items {
		out[item.Name] = item.Finalizers
	}
	return out, nil
}

// waitFinalizer returns once every one of n clusters carries the finalizer.
func waitFinalizer(ctx context.Context, c client.Client, n int, finalizer string, every time.Duration) error {
	for {
		got, err := clusterFinalizers(ctx, c)
		if err != nil {
			return err
		}
		have := 0
		for _, fs := range got {
			if slices.Contains(fs, finalizer) {
				have++
			}
		}
		if have == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d clusters carry %s: %w", have, n, finalizer, ctx.Err())
		case <-time.After(every):
		}
	}
}

// waitClustersGone returns once no ManagedCluster is left.
func waitClustersGone(ctx context.Context, c client.Client) error {
	for {
		got, err := clusterFinalizers(ctx, c)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d clusters left: %w", len(got), ctx.Err())
		case <-time.After(pollEvery(len(got))):
		}
	}
}

// pollEvery is how often the harness lists the clusters while it waits:
// often for a few, less for many, so that its own lists do not load the
// API server it measures.
func pollEvery(clusters int) time.Duration {
	if clusters <= 20 {
		return 20 * time.Millisecond
	}
	return 250 * time.Millisecond
}

// deleteClusters deletes every cluster of the fleet, as a user would.
func deleteClusters(ctx context.Context, c client.Client, f fleet) error {
	if f.inOneCall {
		return c.DeleteAllOf(ctx, &clusterv1.ManagedCluster{})
	}
	for i := range f.clusters {
		mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName(i)}}
		if err := c.Delete(ctx, mc); err != nil {
			return err
		}
	}
	return nil
}

// agentErrors counts the simulated agent's failed patches, which it retries.
var agentErrors atomic.Int64

// agentSwept counts the works the simulated agent released after finding
// them in its sweep, not through its watch.
var agentSwept atomic.Int64

// startAgent runs a simulated work agent as its own user: it removes its
// finalizer from a work agentDelay after the work starts deleting, as OCM's
// agent does once it removed the work's resources.
func startAgent(ctx context.Context, cfg *rest.Config, agentDelay time.Duration) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	s := newScheme()
	agentCache, err := cache.New(cfg, cache.Options{Scheme: s})
	if err != nil {
		return err
	}
	agentClient, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	w := &metav1.PartialObjectMetadata{}
	w.SetGroupVersionKind(workv1.GroupVersion.WithKind("ManifestWork"))
	inf, err := agentCache.GetInformer(ctx, w)
	if err != nil {
		return err
	}
	a := &workAgent{client: agentClient, delay: agentDelay}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.handle(ctx, obj) },
		UpdateFunc: func(_, n any) { a.handle(ctx, n) },
	}); err != nil {
		return err
	}
	go a.sweep(ctx)
	go func() { _ = agentCache.Start(ctx) }()
	if !agentCache.WaitForCacheSync(ctx) {
		return fmt.Errorf("the work agent's cache did not sync")
	}
	return nil
}

// workAgent releases each deleting work once, whether its watch or its
// sweep finds it first.
type workAgent struct {
	client    client.Client
	delay     time.Duration
	scheduled sync.Map // UID -> when the release was scheduled (watch or sweep)
}

// release removes the agent's finalizer from a work. As the agent
// requeues, it retries until the work is let go.
func (a *workAgent) release(ctx context.Context, namespace, name string) {
	u := &metav1.PartialObjectMetadata{}
	u.SetGroupVersionKind(workv1.GroupVersion.WithKind("ManifestWork"))
	u.SetNamespace(namespace)
	u.SetName(name)
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	for ctx.Err() == nil {
		err := a.client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		if agentErrors.Add(1) == 1 {
			fmt.Fprintf(os.Stderr, "the simulated agent retries after: %v\n", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// handle schedules the release of a work its watch delivers deleting,
// delay after it first sees it.
func (a *workAgent) handle(ctx context.Context, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || m.DeletionTimestamp == nil || !slices.Contains(m.Finalizers, workAgentFinalizer) {
		return
	}
	if _, loaded := a.scheduled.LoadOrStore(m.UID, time.Now()); loaded {
		return
	}
	time.AfterFunc(a.delay, func() { a.release(ctx, m.Namespace, m.Name) })
}

// sweep releases, every 2 s until ctx ends, a deleting work the watch did
// not deliver in time (a loaded API server can hold a watch back), as the
// agent's own resync would.
func (a *workAgent) sweep(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(workv1.GroupVersion.WithKind("ManifestWorkList"))
		if err := a.client.List(ctx, list); err != nil {
			continue
		}
		for i := range list.Items {
			m := &list.Items[i]
			if m.DeletionTimestamp == nil || !slices.Contains(m.Finalizers, workAgentFinalizer) {
				continue
			}
			// A release scheduled through the watch retries until
			// it succeeds; only a work the watch never delivered is
			// released here.
			if _, loaded := a.scheduled.LoadOrStore(m.UID, time.Now()); loaded {
				continue
			}
			agentSwept.Add(1)
			go a.release(ctx, m.Namespace, m.Name)
		}
	}
}
