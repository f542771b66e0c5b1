package operator

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fleetops-dev/cleanup-operator/internal/controller"
)

// current is the operator the metrics read; a process may set up more than
// one manager (tests do), and the metrics follow the latest.
var (
	current      atomic.Pointer[Operator]
	registerOnce sync.Once
	cleanup      = controller.NewMetrics()
)

// sharedMetrics are the process's cleanup metrics, shared by every manager.
func sharedMetrics() *controller.Metrics { return cleanup }

func registerMetrics(op *Operator) {
	current.Store(op)
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(cleanup.Collectors()...)
		metrics.Registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "cleanup_cel_compilations_total",
				Help: "CleanupPolicy compilations run; one per policy generation.",
			}, func() float64 { return float64(current.Load().Cache.Compilations()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "cleanup_cel_policies_cached",
				Help: "CleanupPolicies whose compiled programs are cached.",
			}, func() float64 { return float64(current.Load().Cache.Len()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "cleanup_selector_evaluations_total",
				Help: "clusterSelector evaluations run; results are remembered until the policy or the cluster changes.",
			}, func() float64 { return float64(current.Load().Governance.Evaluations()) }),
		)
	})
}
