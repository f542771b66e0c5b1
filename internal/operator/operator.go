// Package operator wires the reconcilers, the webhook and the metrics into a
// manager; cmd/main.go and the test suites share it.
package operator

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/controller"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	webhookv1alpha1 "github.com/fleetops-dev/cleanup-operator/internal/webhook/v1alpha1"
)

// NewScheme returns the scheme of every type the operator reads or writes.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	// ManifestWorks are cached typed: their manifests stay raw JSON bytes,
	// several times smaller than the same objects as maps.
	utilruntime.Must(workv1.Install(s))
	return s
}

// ManagerOptions are the manager options the operator needs wherever it
// runs; callers add addresses, leader election and the webhook server.
func ManagerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme: NewScheme(),
		// The cache keeps no managedFields: a fleet's worth of them is most
		// of its memory and the operator never reads them. No cache is
		// narrowed by a selector: stages and monitored resources may be of
		// any kind, and a narrowed cache would hide objects from the gate.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		// ManagedClusters are read unstructured; serve them from the cache
		// too. Every write names the operator's field manager, so that
		// managedFields say which fields it owns (GitOps tools read them).
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}, FieldOwner: v1alpha1.FieldManager},
	}
}

// Options choose what Setup starts.
type Options struct {
	// EnableWebhooks registers the CleanupPolicy validating webhook.
	EnableWebhooks bool
	// ClusterConcurrency is how many clusters are reconciled, and so torn
	// down, at once. 0 means DefaultClusterConcurrency.
	ClusterConcurrency int
}

// DefaultClusterConcurrency is how many clusters are torn down at once by default.
const DefaultClusterConcurrency = 10

// Operator is what Setup built, for tests and metrics to observe.
type Operator struct {
	Cache      *cel.Cache
	Governance *decision.Governance
	Metrics    *controller.Metrics
}

// Setup reads the schemas of the OCM and policy CRDs, builds the CEL
// environment once, and registers the reconcilers, the webhook and the
// metrics with the manager.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) (*Operator, error) {
	log := logf.FromContext(ctx).WithName("setup")
	schemas, missing, err := snapshot.LoadSchemas(ctx, mgr.GetAPIReader())
	if err != nil {
		return nil, fmt.Errorf("reading the CRDs that type CEL variables: %w", err)
	}
	for _, required := range []string{cel.ManagedClusterCRD, cel.ManifestWorkCRD} {
		if slices.Contains(missing, required) {
			return nil, fmt.Errorf("CRD %s is not installed: the operator governs OCM's ManagedClusters and ManifestWorks "+
				"and starts once OCM's cluster manager is installed on the hub", required)
		}
	}
	if len(missing) > 0 {
		log.Info("CRDs not installed: their CEL variables are checked at run time only", "crds", missing)
	}
	env, err := cel.NewEnv(schemas)
	if err != nil {
		return nil, err
	}
	op := &Operator{Cache: cel.NewCache(env), Governance: decision.NewGovernance(), Metrics: sharedMetrics()}
	recorder := mgr.GetEventRecorder(v1alpha1.FieldManager)

	tally := controller.NewTally()
	fleet := &snapshot.Reader{Client: mgr.GetClient(), Cache: op.Cache, Governance: op.Governance}
	clusters := controller.NewManagedClusterAdapter(mgr, recorder, op.Metrics)
	clusters.Tally = tally
	optional := optionalKinds(mgr, opts, fleet, tally, recorder, clusters, slices.Contains(missing, cel.ConfigurationPolicyCRD))
	if err := optional.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the optional kinds: %w", err)
	}
	if err := (&controller.CleanupPolicyReconciler{
		Tally:      tally,
		Client:     mgr.GetClient(),
		Cache:      op.Cache,
		Governance: op.Governance,
		Recorder:   recorder,
		Optional:   optional,
		Mapper:     mgr.GetRESTMapper(),
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the CleanupPolicy controller: %w", err)
	}
	if err := (&controller.Reconciler[*unstructured.Unstructured]{
		Client:                  mgr.GetClient(),
		Reader:                  fleet,
		Adapter:                 clusters,
		MaxConcurrentReconciles: cmp.Or(opts.ClusterConcurrency, DefaultClusterConcurrency),
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the ManagedCluster controller: %w", err)
	}
	if err := controller.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("indexing ManagedClusters by policy: %w", err)
	}
	if err := (&controller.Reconciler[*workv1.ManifestWork]{
		Client:                  mgr.GetClient(),
		Reader:                  fleet,
		Adapter:                 controller.NewManifestWorkAdapter(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetRESTMapper(), recorder, tally),
		MaxConcurrentReconciles: cmp.Or(opts.ClusterConcurrency, DefaultClusterConcurrency),
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the ManifestWork controller: %w", err)
	}
	// The admission policies the operator relies on, when absent; with a
	// direct client, as the manager's cache is not started yet.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, err
	}
	if err := admissionpolicy.Ensure(ctx, direct); err != nil {
		return nil, fmt.Errorf("creating the admission policies: %w", err)
	}
	if opts.EnableWebhooks {
		if err := webhookv1alpha1.SetupCleanupPolicyWebhookWithManager(mgr, env); err != nil {
			return nil, fmt.Errorf("setting up the CleanupPolicy webhook: %w", err)
		}
	}
	registerMetrics(op)
	return op, nil
}

// optionalKinds are the kinds a hub may not serve, and what the operator
// does with each while its CRD is installed: OCM's policy framework
// (ConfigurationPolicy, Policy) and OCM's add-ons.
func optionalKinds(mgr manager.Manager, opts Options, fleet *snapshot.Reader, tally *controller.Tally, recorder events.EventRecorder,
	clusters *controller.ManagedClusterAdapter, untypedPolicy bool) *controller.Optional {
	prune := &controller.OptionalKind{
		CRD:  controller.ConfigurationPolicyCRD,
		Does: "prune decisions on ConfigurationPolicies",
		Setup: func(m manager.Manager) error {
			return (&controller.Reconciler[*unstructured.Unstructured]{
				Client:                  mgr.GetClient(),
				Reader:                  fleet,
				Adapter:                 controller.NewConfigurationPolicyAdapter(mgr.GetClient(), mgr.GetAPIReader(), recorder, tally),
				MaxConcurrentReconciles: cmp.Or(opts.ClusterConcurrency, DefaultClusterConcurrency),
			}).SetupWithManager(m)
		},
	}
	if untypedPolicy {
		// The CEL environment is built once, at start.
		prune.Note = "`policy` in prune rules stays dynamically typed (checked when evaluated) until the operator restarts"
	}
	decisions := &controller.OptionalKind{
		CRD:  controller.PolicyCRD,
		Does: "prune decisions for Policy templates",
		Setup: func(m manager.Manager) error {
			return (&controller.DecisionsReconciler{Client: mgr.GetClient(), Tally: tally, APIReader: mgr.GetAPIReader(),
				Reader: fleet, Recorder: recorder}).SetupWithManager(m)
		},
	}
	addons := &controller.OptionalKind{
		CRD:     controller.AddOnCRD,
		Does:    "deleting ManagedClusterAddOns in cleanups",
		Setup:   clusters.AllowAddOns,
		Stopped: clusters.ForgetAddOns,
	}
	return controller.NewOptional(mgr, prune, decisions, addons)
}
