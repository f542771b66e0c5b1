package operator

import (
	"sync"
	"sync/atomic"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// current is the operator the metrics read; a process may set up more than
// one manager (tests do), and the metrics follow the latest.
var (
	current      atomic.Pointer[Operator]
	registerOnce sync.Once
	cleanup      = metrics.NewMetrics()
	collectors   = append(cleanup.Collectors(), admissionpolicy.Restores, admissionpolicy.Unrestorable,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cleanup_cel_compilations_total",
			Help: "CleanupPolicy compilations run; one per policy generation.",
		}, func() float64 { return readOperator(func(op *Operator) int64 { return op.Cache.Compilations() }) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "cleanup_cel_policies_cached",
			Help: "CleanupPolicies whose compiled programs are cached.",
		}, func() float64 { return readOperator(func(op *Operator) int { return op.Cache.Len() }) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "cleanup_selector_evaluations_total",
			Help: "clusterSelector evaluations run; results are remembered until the policy or the cluster changes.",
		}, func() float64 { return readOperator(func(op *Operator) int64 { return op.Governance.Evaluations() }) }),
	)
)

// sharedMetrics are the process's cleanup metrics, shared by every manager.
func sharedMetrics() *metrics.Metrics { return cleanup }

// Collectors are the operator's own metrics, every one that Setup registers
// with controller-runtime's registry (which serves them beside its own).
func Collectors() []prometheus.Collector { return collectors }

// readOperator reads a value of the operator set up last; 0 before any.
func readOperator[T int | int64](read func(*Operator) T) float64 {
	op := current.Load()
	if op == nil {
		return 0
	}
	return float64(read(op))
}

func registerMetrics(op *Operator) {
	current.Store(op)
	registerOnce.Do(func() {
		crmetrics.Registry.MustRegister(collectors...)
	})
}
