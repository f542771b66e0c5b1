package watch

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// unmanaged is the manager as the optional controllers see it: the
// controllers set up with it are kept, not added to the manager, so that
// they can be stopped; their watches go through a cache that records the
// event handlers they add; and their names may be registered again.
type unmanaged struct {
	manager.Manager
	cache     *handlerCache
	runnables []manager.Runnable
}

func (m *unmanaged) Add(r manager.Runnable) error {
	m.runnables = append(m.runnables, r)
	return nil
}

func (m *unmanaged) GetCache() cache.Cache { return m.cache }

func (m *unmanaged) GetControllerOptions() config.Controller {
	opts := m.Manager.GetControllerOptions()
	opts.SkipNameValidation = ptr.To(true)
	return opts
}

// handlerCache is the manager's cache; it records the event handlers added
// through it, so that they can be removed from informers other
// controllers share.
type handlerCache struct {
	cache.Cache
	scheme *runtime.Scheme
	mu     sync.Mutex
	regs   []registration
	objs   []client.Object
}

type registration struct {
	informer cache.Informer
	handle   toolscache.ResourceEventHandlerRegistration
}

func (c *handlerCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.objs = append(c.objs, obj)
	c.mu.Unlock()
	return &handlerInformer{Informer: i, cache: c}, nil
}

func (c *handlerCache) add(i cache.Informer, h toolscache.ResourceEventHandlerRegistration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.regs = append(c.regs, registration{informer: i, handle: h})
}

// release removes the recorded handlers, and the informers of the kind gk.
func (c *handlerCache) release(gk schema.GroupKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.regs {
		_ = r.informer.RemoveEventHandler(r.handle)
	}
	for _, obj := range c.objs {
		if gvk, err := apiutil.GVKForObject(obj, c.scheme); err == nil && gvk.GroupKind() == gk {
			_ = c.Cache.RemoveInformer(context.Background(), obj)
		}
	}
	c.regs, c.objs = nil, nil
}

// handlerInformer records the handlers added to the informer it wraps.
type handlerInformer struct {
	cache.Informer
	cache *handlerCache
}

func (i *handlerInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	r, err := i.Informer.AddEventHandler(h)
	if err == nil {
		i.cache.add(i.Informer, r)
	}
	return r, err
}

func (i *handlerInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	r, err := i.Informer.AddEventHandlerWithOptions(h, opts)
	if err == nil {
		i.cache.add(i.Informer, r)
	}
	return r, err
}

func (i *handlerInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	r, err := i.Informer.AddEventHandlerWithResyncPeriod(h, resync)
	if err == nil {
		i.cache.add(i.Informer, r)
	}
	return r, err
}
