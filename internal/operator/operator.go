// Package operator wires the reconcilers, the webhook and the metrics into a
// manager; cmd/main.go and the test suites share it.
package operator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/policy"
	"github.com/fleetops-dev/cleanup-operator/internal/stamp"
	"github.com/fleetops-dev/cleanup-operator/internal/tally"
	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/controller"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/flowcontrol"
	"github.com/fleetops-dev/cleanup-operator/internal/operator/heartbeat"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	"github.com/fleetops-dev/cleanup-operator/internal/watch"
	webhookv1alpha1 "github.com/fleetops-dev/cleanup-operator/internal/webhook/v1alpha1"
)

// NewScheme returns the scheme of every type the operator reads or writes.
func NewScheme() *runtime.Scheme { return scheme.New() }

// ManagerOptions are the manager options the operator needs wherever it
// runs; callers add addresses, leader election and the webhook server.
func ManagerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme: NewScheme(),
		// The cache keeps no managedFields: a fleet's worth of them is most
		// of its memory and the operator never reads them. Of ManifestWorks
		// it keeps what decisions read (TransformManifestWork). No cache is
		// narrowed by a selector: stages and monitored resources may be of
		// any kind, and a narrowed cache would hide objects from the gate.
		// The operator's own ConfigMaps have a cache of their own
		// (OwnConfigMapsCache). One transform for every kind: one by object
		// would need ManifestWork's REST mapping before Setup can say that
		// its CRD is missing.
		Cache: cache.Options{DefaultTransform: Transform},
		// ManagedClusters are read unstructured; serve them from the cache
		// too. Every write names the operator's field manager, so that
		// managedFields say which fields it owns (GitOps tools read them).
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}, FieldOwner: v1alpha1.FieldManager},
	}
}

// Options choose what Setup starts.
type Options struct {
	// OCMCleanupUsers are the users whose deletes admission holds in the
	// namespaces of governed clusters (admissionpolicy.AllObjectsFor).
	OCMCleanupUsers []string
	// EnableWebhooks registers the CleanupPolicy validating webhook.
	EnableWebhooks bool
	// ClusterConcurrency is how many clusters are torn down at once, and
	// objects of the other kinds reconciled at once (clusters governed,
	// four times as many). 0 means DefaultClusterConcurrency.
	ClusterConcurrency int
	// FlowControl creates the operator's FlowSchema and priority level at
	// start when they are absent (internal/flowcontrol).
	FlowControl bool
	// ProgressInterval is how often, at most, a running teardown step's
	// progress is written on its ManagedCluster; 0 means
	// teardown.DefaultProgressInterval, negative on every change.
	ProgressInterval time.Duration
	// ConfirmationMaxAge is how long a deletion confirmation of a
	// deletion-protected ManagedCluster counts. 0 means DefaultConfirmationMaxAge.
	ConfirmationMaxAge time.Duration
	// Records say where teardown records are kept (empty namespace:
	// record.Namespace) and for how long.
	Records teardown.RecordOptions
	// SignalLimits bound the deletion-signal manifests; zero: the defaults.
	SignalLimits admissionpolicy.SignalLimits
	// NamespaceDeny are namespaces (path.Match patterns), beyond
	// decision.DefaultNamespaceDeny and the operator's own, that a
	// teardown never deletes.
	NamespaceDeny []string
	// BlastRadius is the operator-wide budget of teardowns, where a policy
	// sets no spec.blastRadius; the zero value bounds nothing.
	BlastRadius v1alpha1.BlastRadius
}

// DefaultConfirmationMaxAge is how long a deletion confirmation counts by default.
const DefaultConfirmationMaxAge = decision.DefaultConfirmationMaxAge

// Retention of teardown records by default: ten ended records per cluster, none older than 90 days.
const (
	DefaultRecordsPerCluster = settings.DefaultRecordsPerCluster
	DefaultRecordMaxAge      = settings.DefaultRecordMaxAge
)

// DefaultClusterConcurrency is how many clusters are torn down at once by default.
const DefaultClusterConcurrency = 10

// Operator is what Setup built, for tests and metrics to observe.
type Operator struct {
	Cache      *cel.Cache
	Governance *decision.Governance
	Metrics    *metrics.Metrics
	// Teardown is the ManagedCluster teardown, whose memory tests observe.
	Teardown *teardown.ClusterTeardown
}

// Setup reads the schemas of the OCM and policy CRDs, builds the CEL
// environment once, and registers the reconcilers, the webhook and the
// metrics with the manager.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) (*Operator, error) {
	env, missing, err := newEnv(ctx, mgr)
	if err != nil {
		return nil, err
	}
	opts.Records.Retention.Window = policyWindow(mgr.GetClient(), opts.BlastRadius)
	op := &Operator{Cache: cel.NewCache(env), Governance: decision.NewGovernance(), Metrics: sharedMetrics()}
	deps := &controller.Deps{
		Manager:          mgr,
		Reader:           &snapshot.Reader{Client: mgr.GetClient(), Cache: op.Cache, Governance: op.Governance},
		Recorder:         mgr.GetEventRecorder(v1alpha1.FieldManager),
		Tally:            tally.NewTally(),
		Metrics:          op.Metrics,
		Concurrency:      cmp.Or(opts.ClusterConcurrency, DefaultClusterConcurrency),
		ProgressInterval: opts.ProgressInterval,

		ConfirmationMaxAge: cmp.Or(opts.ConfirmationMaxAge, DefaultConfirmationMaxAge),
		Records:            opts.Records,
		SignalLimits:       opts.SignalLimits.OrDefault(),
		NamespaceDeny:      opts.NamespaceDeny,
		BlastRadius:        opts.BlastRadius,
	}
	deps.Records.Namespace = record.Namespace(opts.Records.Namespace)
	own, ownCache, err := newOwnConfigMaps(mgr, deps.Records.Namespace)
	if err != nil {
		return nil, err
	}
	deps.ConfigMaps = own
	optional, err := setupTargets(mgr, deps, ownCache, slices.Contains(missing, cel.ConfigurationPolicyCRD))
	if err != nil {
		return nil, err
	}
	op.Teardown = deps.Teardown()
	guard := policy.NewGuardState()
	if err := setupPolicyController(mgr, op, deps, optional, guard); err != nil {
		return nil, err
	}
	if err := watch.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("setting up the cache indexes: %w", err)
	}
	if err := setupAdmission(ctx, mgr, opts, env, guard); err != nil {
		return nil, err
	}
	if err := addHousekeeping(mgr, opts, own, deps.Records.Namespace); err != nil {
		return nil, err
	}
	registerMetrics(op)
	return op, nil
}

// setupPolicyController registers the CleanupPolicy reconciler. It shares
// the compile cache, the governance and the tally with the targets'
// reconcilers, so a policy's status counts what they decided, and guard
// with the admission guard, so that it says whether that runs.
func setupPolicyController(mgr manager.Manager, op *Operator, deps *controller.Deps, optional *watch.Optional, guard *policy.GuardState) error {
	if err := (&policy.CleanupPolicyReconciler{
		Tally:      deps.Tally,
		Client:     mgr.GetClient(),
		Cache:      op.Cache,
		Governance: op.Governance,
		Recorder:   deps.Recorder,
		Optional:   optional,
		Mapper:     mgr.GetRESTMapper(),
		Metrics:    op.Metrics,

		SignalLimits:      deps.SignalLimits,
		OperatorNamespace: deps.Records.Namespace,
		Guard:             guard,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CleanupPolicy controller: %w", err)
	}
	return nil
}

// addHousekeeping adds what runs beside the reconcilers, on no object's
// event: the check that the records' namespace exists, the sweep of
// records past their age, the settings the plugin's previews decide with,
// and this process's heartbeat, by which the plugin sees an operator
// however it was started. own reads and writes the operator's ConfigMaps.
func addHousekeeping(mgr manager.Manager, opts Options, own client.Client, namespace string) error {
	if err := mgr.Add(&record.NamespaceCheck{Reader: mgr.GetAPIReader(), Namespace: namespace}); err != nil {
		return err
	}
	if err := mgr.Add(&heartbeat.Publisher{Client: own, Namespace: namespace, Version: heartbeat.BuildVersion()}); err != nil {
		return err
	}
	if err := mgr.Add(&record.Sweeper{Client: own, Namespace: namespace, Retention: opts.Records.Retention,
		Every: min(max(opts.Records.Retention.MaxAge/10, time.Minute), time.Hour)}); err != nil {
		return err
	}
	return mgr.Add(&settings.Publisher{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Settings: SettingsOf(opts)})
}

// SettingsOf are the settings of opts that change a decision, as the
// operator publishes them for the plugin's previews.
func SettingsOf(opts Options) *settings.Settings {
	s := settings.Defaults(record.Namespace(opts.Records.Namespace))
	s.BlastRadius = opts.BlastRadius
	if s.BlastRadius.Window == nil {
		s.BlastRadius.Window = &metav1.Duration{Duration: v1alpha1.DefaultBlastRadiusWindow.Duration}
	}
	s.NamespaceDeny = opts.NamespaceDeny
	s.DeleteConfirmationMaxAge.Duration = cmp.Or(opts.ConfirmationMaxAge, DefaultConfirmationMaxAge)
	s.TeardownRecordMaxAge.Duration = opts.Records.Retention.MaxAge
	s.TeardownRecordsPerCluster = opts.Records.Retention.PerCluster
	l := opts.SignalLimits.OrDefault()
	s.SignalManifests = settings.SignalManifests{Kinds: l.Kinds, MaxBytes: l.MaxBytes, MaxTotalBytes: l.MaxTotalBytes}
	return s
}

// setupGuard starts the watcher that puts back the admission and
// flow-control objects, when the operator may watch and write them; when
// it may not, it says so (log, metric, every policy's Guarded condition
// through state) and the operator runs without it.
func setupGuard(ctx context.Context, mgr manager.Manager, direct client.Client, objs []client.Object, state *policy.GuardState) error {
	why, err := admissionpolicy.CanRestore(ctx, direct, objs)
	if err != nil {
		return err
	}
	if why != "" {
		admissionpolicy.Unrestorable.Set(1)
		state.Unrestorable(why)
		logf.FromContext(ctx).WithName("setup").Error(nil, "admission guard not started", "reason", why)
		return nil
	}
	admissionpolicy.Unrestorable.Set(0)
	// Each object's series from the start, at 0: the alert's increase()
	// then sees the first restore.
	for _, obj := range objs {
		for _, change := range []string{"deleted", "changed"} {
			admissionpolicy.Restores.WithLabelValues(obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), change)
		}
	}
	g := &admissionpolicy.Guard{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(v1alpha1.FieldManager),
		Objects: objs, Restored: func(kind, name, change string) {
			admissionpolicy.Restores.WithLabelValues(kind, name, change).Inc()
			state.Restored(kind, name, change, time.Now())
		}}
	if err := g.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the admission guard: %w", err)
	}
	state.Running()
	return nil
}

// newEnv reads the CRDs that type the CEL variables and builds the
// environment; it fails when OCM's own CRDs are missing.
func newEnv(ctx context.Context, mgr manager.Manager) (*cel.Env, []string, error) {
	schemas, missing, err := snapshot.LoadSchemas(ctx, mgr.GetAPIReader())
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CRDs that type CEL variables: %w", err)
	}
	for _, required := range []string{cel.ManagedClusterCRD, cel.ManifestWorkCRD} {
		if slices.Contains(missing, required) {
			return nil, nil, fmt.Errorf("CRD %s is not installed: the operator governs OCM's ManagedClusters and ManifestWorks "+
				"and starts once OCM's cluster manager is installed on the hub", required)
		}
	}
	if len(missing) > 0 {
		logf.FromContext(ctx).WithName("setup").Info("CRDs not installed: their CEL variables are checked at run time only", "crds", missing)
	}
	env, err := cel.NewEnv(schemas)
	return env, missing, err
}

// setupTargets registers the reconciler of every governed kind
// (controller.Targets): at once, or, for an optional kind, while its CRD
// is installed, with the other optional kinds.
func setupTargets(mgr manager.Manager, deps *controller.Deps, ownConfigMaps cache.Cache, untypedPolicy bool) (*watch.Optional, error) {
	var kinds []*watch.OptionalKind
	for _, t := range controller.Targets {
		if t.CRD != "" {
			k := &watch.OptionalKind{CRD: t.CRD, Does: t.Does, Setup: func(m manager.Manager) error { return t.Adapt(deps, m) }}
			if untypedPolicy && t.CRD == controller.ConfigurationPolicyCRD {
				// The CEL environment is built once, at start.
				k.Note = "`policy` in prune rules stays dynamically typed (checked when evaluated) until the operator restarts"
			}
			kinds = append(kinds, k)
			continue
		}
		if err := t.Adapt(deps, mgr); err != nil {
			return nil, fmt.Errorf("setting up the %s controller: %w", t.Name, err)
		}
	}
	kinds = append(kinds, &watch.OptionalKind{
		CRD:  controller.PolicyCRD,
		Does: "prune decisions for Policy templates",
		Setup: func(m manager.Manager) error {
			return (&stamp.DecisionsReconciler{Client: mgr.GetClient(), Tally: deps.Tally, APIReader: mgr.GetAPIReader(),
				ConfigMaps: ownConfigMaps, Reader: deps.Reader, Recorder: deps.Recorder}).SetupWithManager(m)
		},
	}, &watch.OptionalKind{
		CRD:     controller.AddOnCRD,
		Does:    "deleting ManagedClusterAddOns in cleanups",
		Setup:   deps.Teardown().AllowAddOns,
		Stopped: deps.Teardown().ForgetAddOns,
	})
	optional := watch.NewOptional(mgr, kinds...)
	if err := optional.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the optional kinds: %w", err)
	}
	return optional, nil
}

// setupAdmission creates the admission policies the operator relies on and,
// if asked to, its flow control objects, when absent, starts their guard,
// which reports to guard, and registers the CleanupPolicy webhook if asked to.
func setupAdmission(ctx context.Context, mgr manager.Manager, opts Options, env *cel.Env, guard *policy.GuardState) error {
	// With a direct client, as the manager's cache is not started yet.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	limits := opts.SignalLimits.OrDefault()
	if err := namespacedKinds(mgr.GetRESTMapper(), limits); err != nil {
		return err
	}
	user, err := admissionpolicy.OperatorUser(ctx, direct)
	if err != nil {
		return err
	}
	guarded := admissionpolicy.AllObjectsFor(user, limits, opts.OCMCleanupUsers)
	err = admissionpolicy.EnsureSignalLimits(ctx, direct, limits)
	if err == nil {
		err = admissionpolicy.EnsureObjects(ctx, direct, guarded)
	}
	if err != nil {
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("creating the admission policies: %w", err)
		}
		// The bootstrap role was dropped: reported below, not fatal.
		logf.FromContext(ctx).WithName("setup").Error(err, "cannot create the admission policies")
	}
	if opts.FlowControl {
		// The operator works without them, and a teardown must not wait
		// on them: a failure is reported, not fatal.
		if _, err := flowcontrol.Ensure(ctx, direct); err != nil {
			logf.FromContext(ctx).WithName("setup").Error(err,
				"the operator's FlowSchema and priority level are missing; its requests share the level of other service accounts")
		}
		if namespace, name, err := serviceaccount.SplitUsername(user); err == nil {
			guarded = append(guarded, flowcontrol.Objects(namespace, name)...)
		}
	}
	if err := setupGuard(ctx, mgr, direct, guarded, guard); err != nil {
		return err
	}
	if opts.EnableWebhooks {
		if err := webhookv1alpha1.SetupCleanupPolicyWebhookWithManager(mgr, env, opts.SignalLimits.OrDefault(), opts.Records.Retention.MaxAge); err != nil {
			return fmt.Errorf("setting up the CleanupPolicy webhook: %w", err)
		}
	}
	return nil
}

// namespacedKinds fails unless the hub serves each kind, apiVersion/Kind,
// as namespaced: a deletion-signal manifest must not reach the managed
// cluster's cluster scope.
func namespacedKinds(mapper meta.RESTMapper, limits admissionpolicy.SignalLimits) error {
	if err := limits.Validate(); err != nil {
		return err
	}
	for _, k := range limits.Kinds {
		i := strings.LastIndex(k, "/")
		gv, err := schema.ParseGroupVersion(k[:i])
		if err != nil {
			return fmt.Errorf("deletion-signal kind %q: %w", k, err)
		}
		m, err := mapper.RESTMapping(gv.WithKind(k[i+1:]).GroupKind(), gv.Version)
		switch {
		case err != nil:
			return fmt.Errorf("deletion-signal kind %q: the hub does not serve it, so it cannot be known to be namespaced: %w", k, err)
		case m.Scope.Name() != meta.RESTScopeNameNamespace:
			return fmt.Errorf("deletion-signal kind %q is cluster-scoped: only namespaced kinds may be allowed", k)
		}
	}
	return nil
}
