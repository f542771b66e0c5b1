package monitoring

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
)

// exported maps each series name the operator serves to its label names.
type exported map[string]map[string]bool

var (
	exportedOnce sync.Once
	exportedSet  exported
	exportedErr  error
)

// exportedMetrics is what the manager's metrics endpoint serves: the
// operator's own collectors (operator.Collectors, registered in a fresh
// registry and exercised so that every vector has a series), and
// controller-runtime's registry once a controller has reconciled and a
// leader election has been won. Names and label names are read from what
// the registries gather, not from a list.
func exportedMetrics(t *testing.T) exported {
	t.Helper()
	exportedOnce.Do(func() { exportedSet, exportedErr = gatherExported() })
	if exportedErr != nil {
		t.Fatal(exportedErr)
	}
	return exportedSet
}

func gatherExported() (exported, error) {
	own := prometheus.NewPedanticRegistry()
	descs := 0
	for _, c := range operator.Collectors() {
		if err := own.Register(c); err != nil {
			return nil, err
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for range ch {
			descs++
		}
		if err := exercise(c); err != nil {
			return nil, err
		}
	}
	families, err := own.Gather()
	if err != nil {
		return nil, err
	}
	if len(families) != descs {
		return nil, fmt.Errorf("the operator's collectors describe %d metrics but %d were gathered: exercise() misses a kind of collector", descs, len(families))
	}
	if err := exerciseControllerRuntime(); err != nil {
		return nil, err
	}
	theirs, err := crmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := exported{}
	for _, f := range append(families, theirs...) {
		out.add(f)
	}
	return out, nil
}

// add records a family's series names (a histogram's _bucket, _sum and
// _count) with their label names.
func (e exported) add(f *dto.MetricFamily) {
	labels := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = true
		}
	}
	with := func(extra ...string) map[string]bool {
		out := map[string]bool{}
		for l := range labels {
			out[l] = true
		}
		for _, l := range extra {
			out[l] = true
		}
		return out
	}
	name := f.GetName()
	switch f.GetType() {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		e[name+"_bucket"] = with("le")
		e[name+"_sum"], e[name+"_count"] = with(), with()
	case dto.MetricType_SUMMARY:
		e[name] = with("quantile")
		e[name+"_sum"], e[name+"_count"] = with(), with()
	default:
		e[name] = with()
	}
}

// exercise gives a vector collector one series, with as many label values
// as it takes, so that the registry gathers it with its label names.
func exercise(c prometheus.Collector) error {
	type vec interface {
		try(n int) error
	}
	var v vec
	switch c := c.(type) {
	case *prometheus.GaugeVec:
		v = tryFunc(func(values []string) error {
			g, err := c.GetMetricWithLabelValues(values...)
			if err == nil {
				g.Set(1)
			}
			return err
		})
	case *prometheus.CounterVec:
		v = tryFunc(func(values []string) error {
			m, err := c.GetMetricWithLabelValues(values...)
			if err == nil {
				m.Inc()
			}
			return err
		})
	case *prometheus.HistogramVec:
		v = tryFunc(func(values []string) error {
			m, err := c.GetMetricWithLabelValues(values...)
			if err == nil {
				m.Observe(1)
			}
			return err
		})
	default:
		return nil // a metric without labels is always gathered
	}
	for n := 0; n <= 16; n++ {
		if v.try(n) == nil {
			return nil
		}
	}
	return fmt.Errorf("no label count between 0 and 16 fits %T", c)
}

type tryFunc func(values []string) error

func (f tryFunc) try(n int) error {
	values := make([]string, n)
	for i := range values {
		values[i] = "x"
	}
	return f(values)
}

// exerciseControllerRuntime runs an unmanaged controller through a
// reconcile that fails and one that succeeds, and wins a leader election,
// so that controller-runtime's registry gathers its controller, workqueue
// and leader-election metrics.
func exerciseControllerRuntime() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	calls := 0
	c, err := controller.NewTypedUnmanaged("metrics-probe", controller.Options{
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			calls++
			if calls == 1 {
				return reconcile.Result{}, errors.New("a failing reconcile, counted")
			}
			close(done)
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		return err
	}
	events := make(chan event.GenericEvent, 1)
	if err := c.Watch(source.Channel(events, &handler.EnqueueRequestForObject{})); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	probe := &corev1.ConfigMap{}
	probe.SetName("probe")
	events <- event.GenericEvent{Object: probe}
	select {
	case <-done:
	case <-ctx.Done():
		return errors.New("the probe controller did not reconcile")
	}

	led := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          &memoryLock{identity: "probe"},
		Name:          "probe",
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(led) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	go le.Run(ctx)
	select {
	case <-led:
	case <-ctx.Done():
		return errors.New("the probe leader election was not won")
	}
	return nil
}

// memoryLock is a leader-election lock held in memory.
type memoryLock struct {
	mu       sync.Mutex
	identity string
	record   *resourcelock.LeaderElectionRecord
}

func (l *memoryLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.record == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, "probe")
	}
	r := *l.record
	return &r, []byte(fmt.Sprint(r)), nil
}

func (l *memoryLock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.record = &r
	return nil
}

func (l *memoryLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.Create(ctx, r)
}

func (l *memoryLock) RecordEvent(string) {}
func (l *memoryLock) Identity() string   { return l.identity }
func (l *memoryLock) Describe() string   { return "memory/probe" }
