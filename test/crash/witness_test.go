package crash

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

var (
	clustersGVR   = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}
	worksGVR      = schema.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
	addonsGVR     = schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	configGVR     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// objectKey names an object by resource, namespace and name (none for a
// namespace); the tests never reuse a name.
type objectKey struct {
	resource, namespace, name string
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.resource + "/" + k.name
	}
	return k.resource + " " + k.namespace + "/" + k.name
}

// removal is an object's etcd revision and state at one point of its
// deletion.
type removal struct {
	revision int64
	object   *unstructured.Unstructured
}

// witness watches the resources a teardown removes and records, for each
// object, the revision and state at which its deletion began (its
// deletionTimestamp appeared) and at which it was gone. Its watches resume
// from the last revision they saw, so they miss nothing.
type witness struct {
	mu      sync.Mutex
	started map[objectKey]removal
	gone    map[objectKey]removal
	err     error
}

func watchRemovals(ctx context.Context, dyn dynamic.Interface) (*witness, error) {
	w := &witness{started: map[objectKey]removal{}, gone: map[objectKey]removal{}}
	for _, gvr := range []schema.GroupVersionResource{clustersGVR, worksGVR, addonsGVR, configGVR, namespacesGVR} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return dyn.Resource(gvr).Watch(ctx, opts)
			},
		})
		if err != nil {
			return nil, err
		}
		go w.record(gvr, rw)
	}
	return w, nil
}

func (w *witness) record(gvr schema.GroupVersionResource, rw *watchtools.RetryWatcher) {
	defer rw.Stop()
	for ev := range rw.ResultChan() {
		switch ev.Type {
		case watch.Modified, watch.Deleted:
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if ev.Type == watch.Modified && u.GetDeletionTimestamp() == nil {
				continue
			}
			rev, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
			key := objectKey{gvr.Resource, u.GetNamespace(), u.GetName()}
			w.mu.Lock()
			if err != nil && w.err == nil {
				w.err = fmt.Errorf("%s carries resource version %q", key, u.GetResourceVersion())
			}
			if _, ok := w.started[key]; !ok {
				w.started[key] = removal{revision: rev, object: u}
			}
			if ev.Type == watch.Deleted {
				w.gone[key] = removal{revision: rev, object: u}
			}
			w.mu.Unlock()
		case watch.Error:
			w.mu.Lock()
			if w.err == nil {
				w.err = fmt.Errorf("watching %s: %v", gvr.Resource, describe(ev.Object))
			}
			w.mu.Unlock()
		}
	}
}

func describe(obj runtime.Object) string {
	if s, ok := obj.(*metav1.Status); ok {
		return s.Message
	}
	return fmt.Sprintf("%v", obj)
}

// deleting returns the start of an object's deletion, if it was seen.
func (w *witness) deleting(k objectKey) (removal, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.started[k]
	return r, ok
}

// deletingIn returns the objects of a resource in a namespace whose
// deletion was seen to begin.
func (w *witness) deletingIn(resource, namespace string) map[objectKey]removal {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[objectKey]removal{}
	for k, r := range w.started {
		if k.resource == resource && k.namespace == namespace {
			out[k] = r
		}
	}
	return out
}

// removed returns the removal of an object, if it was seen.
func (w *witness) removed(k objectKey) (removal, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.gone[k]
	return r, ok
}

func (w *witness) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
