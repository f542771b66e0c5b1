// Command propagator runs the governance-policy-propagator's root-policy and
// replicated-policy controllers, with its hub-template resolver, wired as its
// main.go wires them (without PlacementRules, policy automation, encryption
// keys, metrics or the webhook, which the scenarios do not use). The e2e
// suite runs it as a process of its own, as a hub runs the propagator in its
// own Deployment: it is built with the module file of the propagator's
// version (go.mod or ocm-v1.0.0.mod), whatever OCM version the suite runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"

	k8sdepwatches "github.com/stolostron/kubernetes-dependency-watches/client"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	policyv1 "open-cluster-management.io/governance-policy-propagator/api/v1"
	policyv1beta1 "open-cluster-management.io/governance-policy-propagator/api/v1beta1"
	propagatorctrl "open-cluster-management.io/governance-policy-propagator/controllers/propagator"
)

func main() {
	// controller-runtime registers --kubeconfig, the hub's kubeconfig.
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	cfg, err := ctrl.GetConfig()
	if err == nil {
		err = run(ctrl.SetupSignalHandler(), cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "propagator:", err)
		os.Exit(1)
	}
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	utilruntime.Must(policyv1beta1.AddToScheme(s))
	return s
}

// newManager makes the manager the controllers run in, without metrics
// or probes, with the cache index the propagator's handlers need.
func newManager(ctx context.Context, cfg *rest.Config) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 newScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	// The propagator's handlers find PlacementBindings by this index.
	if err := mgr.GetCache().IndexField(ctx, &policyv1.PlacementBinding{}, "placementRef.name",
		func(obj client.Object) []string {
			return []string{obj.(*policyv1.PlacementBinding).PlacementRef.Name}
		}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// run starts the dependency watcher, which the replicated-policy
// controller and the template resolver need running before they are set
// up, then runs both controllers until ctx ends.
func run(ctx context.Context, cfg *rest.Config) error {
	mgr, err := newManager(ctx, cfg)
	if err != nil {
		return err
	}

	dependencyReconciler, dependencySource := k8sdepwatches.NewControllerRuntimeSource()
	watcher, err := k8sdepwatches.New(cfg, dependencyReconciler, nil)
	if err != nil {
		return err
	}
	watcherDone := make(chan error, 1)
	go func() { watcherDone <- watcher.Start(ctx) }()

	updates := make(chan event.GenericEvent, 1024)
	propagator := propagatorctrl.Propagator{
		Client:                  mgr.GetClient(),
		Scheme:                  mgr.GetScheme(),
		Recorder:                mgr.GetEventRecorderFor(propagatorctrl.ControllerName),
		RootPolicyLocks:         &sync.Map{},
		ReplicatedPolicyUpdates: updates,
	}
	if err := (&propagatorctrl.RootPolicyReconciler{Propagator: propagator}).SetupWithManager(mgr, 2); err != nil {
		return err
	}
	resolver, templatesSource, err := newTemplateResolver(ctx, cfg, templateConfig{
		AdditionalIndentation: 8,
		DisabledFunctions:     []string{},
		SkipBatchManagement:   true,
		StartDelim:            propagatorctrl.TemplateStartDelim,
		StopDelim:             propagatorctrl.TemplateStopDelim,
	})
	if err != nil {
		return err
	}
	select {
	case <-watcher.Started():
	case err := <-watcherDone:
		return fmt.Errorf("the dependency watcher stopped: %w", err)
	}
	resolvers, saTemplatesSource := propagatorctrl.NewTemplateResolvers(ctx, mgr.GetConfig(), mgr.GetClient(), resolver, updates)
	replicated := &propagatorctrl.ReplicatedPolicyReconciler{
		Propagator:        propagator,
		ResourceVersions:  &sync.Map{},
		DynamicWatcher:    watcher,
		TemplateResolvers: resolvers,
	}
	if err := replicated.SetupWithManager(mgr, 2, dependencySource,
		source.Channel(updates, &handler.EnqueueRequestForObject{}), templatesSource, saTemplatesSource, false); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
