package controller

import (
	"cmp"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/governance"
	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/stamp"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// Names of the CRDs of the kinds a hub may not serve.
const (
	ConfigurationPolicyCRD = cel.ConfigurationPolicyCRD
	PolicyCRD              = "policies.policy.open-cluster-management.io"
	AddOnCRD               = "managedclusteraddons.addon.open-cluster-management.io"
)

// Targets are the kinds the operator governs, one line each: adding a kind
// is its adapter's file and a line here.
var Targets = []Target{
	{Name: "ManagedCluster", Adapt: adaptTimes(governConcurrencyFactor, func(d *Deps) stamp.Adapter[*unstructured.Unstructured] {
		return governance.NewManagedClusterAdapter(d.Teardown(), d.ConfirmationMaxAge, d.SignalLimits)
	})},
	{Name: "ManagedCluster teardown", Adapt: func(d *Deps, m manager.Manager) error {
		return d.Teardown().SetupWithManager(m, cmp.Or(d.Concurrency, 1))
	}},
	{Name: "ManifestWork", Adapt: adapt(func(d *Deps) stamp.Adapter[*workv1.ManifestWork] {
		return stamp.NewManifestWorkAdapter(d.Manager.GetClient(), d.Manager.GetAPIReader(), d.Manager.GetRESTMapper(), d.Recorder, d.Tally, d.Metrics)
	})},
	{Name: "ConfigurationPolicy", CRD: ConfigurationPolicyCRD, Does: "prune decisions on ConfigurationPolicies",
		Adapt: adapt(func(d *Deps) stamp.Adapter[*unstructured.Unstructured] {
			return stamp.NewConfigurationPolicyAdapter(d.Manager.GetClient(), d.Manager.GetAPIReader(), d.Recorder, d.Tally, d.Metrics)
		})},
}

// Target is one governed kind: its adapter, run by the generic Reconciler.
type Target struct {
	// Name names the kind in errors.
	Name string
	// CRD, when set, makes the kind optional: its controller runs while
	// that CRD is installed (see Optional).
	CRD string
	// Does says, for an optional kind, what the operator does with it.
	Does string
	// Adapt registers the kind's reconciler with the manager it is given.
	Adapt func(d *Deps, m manager.Manager) error
}

// Deps are what the adapters are built from.
type Deps struct {
	Manager  manager.Manager
	Reader   *snapshot.Reader
	Recorder events.EventRecorder
	Tally    *tally.Tally
	Metrics  *metrics.Metrics
	// Concurrency is how many objects of a kind are reconciled at once;
	// 0 means one.
	Concurrency int
	// ProgressInterval is how often, at most, a running step's progress is
	// written on its object; 0 means DefaultProgressInterval.
	ProgressInterval time.Duration
	// ConfirmationMaxAge is how long a deletion confirmation counts.
	ConfirmationMaxAge time.Duration
	// Records say where teardown records are kept, and for how long.
	Records teardown.RecordOptions
	// SignalLimits bound the deletion-signal manifests the operator applies.
	SignalLimits admissionpolicy.SignalLimits
	// NamespaceDeny are namespaces, beyond decision.DefaultNamespaceDeny
	// and the operator's own, that a teardown never deletes.
	NamespaceDeny []string
	// BlastRadius is the operator-wide budget, where a policy sets none.
	BlastRadius v1alpha1.BlastRadius
	// ConfigMaps reads the operator's own ConfigMaps (the teardown records)
	// from a cache of them alone, and writes them.
	ConfigMaps client.Client

	teardown *teardown.ClusterTeardown
}

// Teardown is the ManagedCluster teardown, built once: governance shares
// its watches and states, and the optional add-on kind turns its add-on
// watches on and off.
func (d *Deps) Teardown() *teardown.ClusterTeardown {
	if d.teardown == nil {
		d.teardown = teardown.NewClusterTeardown(d.Manager, d.Reader, d.Recorder, d.Metrics, d.ProgressInterval, d.Records, d.ConfigMaps)
		d.teardown.Tally = d.Tally
		d.teardown.NamespaceDeny = decision.NamespaceDenyList(record.Namespace(d.Records.Namespace), d.NamespaceDeny)
		d.teardown.BlastRadius = d.BlastRadius
	}
	return d.teardown
}

// governConcurrencyFactor is how many times Deps.Concurrency the clusters
// being governed (not torn down: that is the teardown's, at
// Deps.Concurrency) are reconciled at once. Governing a fleet is a patch a
// cluster, and ten workers spent 10,000 clusters' governing waiting on
// their patches.
const governConcurrencyFactor = 4

// adapt registers the generic Reconciler of one adapter.
func adapt[T client.Object](build func(d *Deps) stamp.Adapter[T]) func(*Deps, manager.Manager) error {
	return adaptTimes(1, build)
}

// adaptTimes registers the generic Reconciler of one adapter, with factor
// times Deps.Concurrency workers.
func adaptTimes[T client.Object](factor int, build func(d *Deps) stamp.Adapter[T]) func(*Deps, manager.Manager) error {
	return func(d *Deps, m manager.Manager) error {
		return (&stamp.Reconciler[T]{
			Client:                  d.Manager.GetClient(),
			Reader:                  d.Reader,
			Adapter:                 build(d),
			MaxConcurrentReconciles: factor * cmp.Or(d.Concurrency, 1),
		}).SetupWithManager(m)
	}
}
