package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// discoveryPoll is how soon a CRD that is established but not yet in
// discovery is looked at again: discovery has no watch.
const discoveryPoll = 250 * time.Millisecond

// OptionalKind is a kind the operator runs without: what it does with the
// kind runs only while the kind's CRD is established.
type OptionalKind struct {
	// CRD names the CustomResourceDefinition that serves the kind.
	CRD string
	// Does says what the operator does with the kind, as a noun phrase:
	// "prune decisions on ConfigurationPolicies".
	Does string
	// Setup registers the kind's controllers with the manager it is
	// given. They run while the CRD is established, and are set up anew
	// each time it is installed.
	Setup func(manager.Manager) error
	// Stopped runs once the kind's controllers have stopped, as the CRD goes.
	Stopped func()
	// Note is logged when the kind is turned on.
	Note string

	known, on bool
	// mu is held for reading by whoever reads the kind from the cache
	// (WhileOn), and for writing while the kind is turned off, so that
	// no read recreates an informer of a kind that is no longer served.
	mu        sync.RWMutex
	groupKind schema.GroupKind
	cancel    context.CancelFunc
	done      sync.WaitGroup
	cache     *handlerCache
}

// Optional turns the optional kinds on and off as their CRDs come and go,
// without a restart. It watches CustomResourceDefinitions, metadata only,
// and says once each way, in its log and in every CleanupPolicy's Ready
// message, what the operator does not do and why.
type Optional struct {
	mgr    manager.Manager
	reader client.Reader
	kinds  map[string]*OptionalKind
	// ctx is the manager's: the optional controllers run under it.
	ctx context.Context
	// mu serializes turning kinds on and off, and the manager's shutdown.
	mu      sync.Mutex
	started chan struct{}
	// changed wakes the CleanupPolicy reconciler when a kind turns on or off.
	changed chan event.TypedGenericEvent[client.Object]
	// resolve wakes the supervisor for every kind once it starts.
	resolve chan event.TypedGenericEvent[client.Object]
}

// NewOptional returns the supervisor of the given kinds.
func NewOptional(mgr manager.Manager, kinds ...*OptionalKind) *Optional {
	o := &Optional{mgr: mgr, reader: mgr.GetAPIReader(), kinds: map[string]*OptionalKind{}, started: make(chan struct{}),
		changed: make(chan event.TypedGenericEvent[client.Object], 1),
		resolve: make(chan event.TypedGenericEvent[client.Object], len(kinds))}
	for _, k := range kinds {
		o.kinds[k.CRD] = k
		crd := &metav1.PartialObjectMetadata{}
		crd.Name = k.CRD
		o.resolve <- event.TypedGenericEvent[client.Object]{Object: crd}
	}
	return o
}

// SetupWithManager watches the CRDs of the optional kinds, and runs the
// supervisor with the manager, on the leader only.
func (o *Optional) SetupWithManager(mgr manager.Manager) error {
	if err := mgr.Add(o); err != nil {
		return err
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return builder.ControllerManagedBy(mgr).
		Named("optional-kinds").
		For(crd, builder.WithPredicates(predicate.NewPredicateFuncs(func(crd client.Object) bool { return o.kinds[crd.GetName()] != nil }))).
		WatchesRawSource(source.Channel(o.resolve, &handler.EnqueueRequestForObject{})).
		Complete(o)
}

// Start implements manager.Runnable: it holds the manager's context for
// the optional controllers, and stops them when the manager stops.
func (o *Optional) Start(ctx context.Context) error {
	o.ctx = ctx
	close(o.started)
	<-ctx.Done()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range o.kinds {
		if k.on {
			o.turnOff(k)
		}
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the
// optional controllers write, as the others do, on the leader only.
func (o *Optional) NeedLeaderElection() bool { return true }

// Reconcile turns a kind on when its CRD is established, and off when it
// is gone or being deleted.
func (o *Optional) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	k := o.kinds[req.Name]
	if k == nil {
		return reconcile.Result{}, nil
	}
	select {
	case <-o.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	// The whole CRD, from the API server, for the few optional ones: the
	// cache holds only the metadata of the hub's CRDs.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := o.reader.Get(ctx, client.ObjectKey{Name: k.CRD}, crd)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	served := err == nil && crd.DeletionTimestamp == nil && established(crd)
	o.mu.Lock()
	defer o.mu.Unlock()
	if ctx.Err() != nil || (k.known && served == k.on) {
		return reconcile.Result{}, nil
	}
	if served && !o.discovered(crd) {
		// Established, but not yet in discovery: an informer started now
		// would fail. Discovery has no watch; look again shortly.
		return reconcile.Result{RequeueAfter: discoveryPoll}, nil
	}
	log := logf.FromContext(ctx).WithValues("crd", k.CRD)
	switch {
	case served:
		k.groupKind = schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		if err := o.turnOn(k); err != nil {
			return reconcile.Result{}, err
		}
		log.Info("optional CRD installed: " + k.Does + " on")
		if k.Note != "" {
			log.Info(k.Note)
		}
	case !k.known:
		log.Info("optional CRD not installed: " + k.Does + " off until it is")
	default:
		o.turnOff(k)
		log.Info("optional CRD removed: " + k.Does + " off until it is installed again")
	}
	k.mu.Lock()
	k.known = true
	k.mu.Unlock()
	o.notify()
	return reconcile.Result{}, nil
}

// discovered reports whether the REST mapper maps every served version of the CRD.
func (o *Optional) discovered(crd *apiextensionsv1.CustomResourceDefinition) bool {
	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	for _, v := range crd.Spec.Versions {
		if _, err := o.mgr.GetRESTMapper().RESTMapping(gk, v.Name); v.Served && err != nil {
			return false
		}
	}
	return true
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// turnOn sets up the kind's controllers and starts them.
func (o *Optional) turnOn(k *OptionalKind) error {
	k.cache = &handlerCache{Cache: o.mgr.GetCache(), scheme: o.mgr.GetScheme()}
	m := &unmanaged{Manager: o.mgr, cache: k.cache}
	if k.Setup != nil {
		if err := k.Setup(m); err != nil {
			return fmt.Errorf("setting up the controllers of %s: %w", k.CRD, err)
		}
	}
	ctx, cancel := context.WithCancel(o.ctx)
	log := logf.FromContext(ctx).WithName("optional").WithValues("crd", k.CRD)
	for _, r := range m.runnables {
		k.done.Go(func() {
			if err := r.Start(ctx); err != nil {
				log.Error(err, "optional controller stopped")
			}
		})
	}
	k.mu.Lock()
	k.cancel, k.on = cancel, true
	k.mu.Unlock()
	return nil
}

// turnOff stops the kind's controllers, removes their event handlers and
// the informers of the kind from the manager's cache: a kind that is no
// longer served leaves nothing that lists or watches it.
func (o *Optional) turnOff(k *OptionalKind) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.on = false
	k.cancel()
	k.done.Wait()
	k.cache.release(k.groupKind)
	if k.Stopped != nil {
		k.Stopped()
	}
}

// WhileOn runs read if the kind is on, and keeps it on until read returns.
func (o *Optional) WhileOn(crd string, read func() error) error {
	if o == nil || o.kinds[crd] == nil {
		return read()
	}
	k := o.kinds[crd]
	k.mu.RLock()
	defer k.mu.RUnlock()
	if !k.on {
		return nil
	}
	return read()
}

// Off lists what the operator does not do, and why, for the kinds whose
// CRDs are known not to be served; nil when every one is.
func (o *Optional) Off() []string {
	if o == nil {
		return nil
	}
	var out []string
	for _, k := range o.kinds {
		k.mu.RLock()
		if k.known && !k.on {
			out = append(out, fmt.Sprintf("%s (CRD %s not installed)", k.Does, k.CRD))
		}
		k.mu.RUnlock()
	}
	slices.Sort(out)
	return out
}

// OffMessage is what a CleanupPolicy's Ready message says of the kinds
// that are off; empty when none is.
func (o *Optional) OffMessage() string {
	off := o.Off()
	if len(off) == 0 {
		return ""
	}
	return "; off until their CRDs are installed: " + strings.Join(off, ", ")
}

func (o *Optional) notify() {
	select {
	case o.changed <- event.TypedGenericEvent[client.Object]{Object: &metav1.PartialObjectMetadata{}}:
	default: // a wake-up is already due
	}
}

// Source wakes its handler when a kind turns on or off.
func (o *Optional) Source(h handler.EventHandler) source.Source {
	return source.Channel(o.changed, h)
}
