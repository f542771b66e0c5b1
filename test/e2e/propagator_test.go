package e2e

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/gomega"
	k8sdepwatches "github.com/stolostron/kubernetes-dependency-watches/client"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1 "open-cluster-management.io/governance-policy-propagator/api/v1"
	propagatorctrl "open-cluster-management.io/governance-policy-propagator/controllers/propagator"
)

// startPropagator runs the governance-policy-propagator's root-policy and
// replicated-policy controllers, with its hub-template resolver, wired as its
// main.go wires them (without PlacementRules, policy automation, encryption
// keys, metrics or the webhook, which the scenarios do not use). Placement
// decisions are written by the tests: no placement controller runs.
func startPropagator(cfg *rest.Config) *component {
	cfg = rest.CopyConfig(cfg)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 newScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	// The propagator's handlers find PlacementBindings by this index.
	Expect(mgr.GetCache().IndexField(ctx, &policyv1.PlacementBinding{}, "placementRef.name",
		func(obj client.Object) []string {
			return []string{obj.(*policyv1.PlacementBinding).PlacementRef.Name}
		})).To(Succeed())

	return runComponent("the propagator", func(ctx context.Context) error {
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
	})
}
