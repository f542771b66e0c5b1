package decision_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestOutOfOrder: an add-on or work being deleted before the step of the
// teardown that deletes it is reported (DeletedOutOfOrder, a hold for the
// record, who as far as the API shows it); the objects of the step under
// way, what this process deleted, the signal work and a dry run are not.
func TestOutOfOrder(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	addons := decision.ManagedClusterAddOns
	compile := func(t *testing.T, spec v1alpha1.CleanupPolicySpec) *cel.Policy {
		t.Helper()
		spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyRequired
		p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: spec})
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		return p
	}
	gated := v1alpha1.CleanupPolicySpec{MonitoredResources: []v1alpha1.MonitoredResource{{
		GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	plan := func(p *cel.Policy, finalizers []string, objs map[schema.GroupVersionResource][]decision.Object, deleted ...types.UID) *decision.Plan {
		deletedAt := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		mc := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "c1", "uid": "c1"}}}
		mc.SetDeletionTimestamp(&deletedAt)
		mc.SetFinalizers(finalizers)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "ns",
			Labels: ocmLabelled(map[string]string{v1alpha1.ClusterDeletingLabel: "true"}, "c1")}}
		memory := decision.Memory{Deleted: map[types.UID]bool{}}
		for _, uid := range deleted {
			memory.Deleted[uid] = true
		}
		s := &decision.Snapshot{Cluster: mc, Namespace: ns, Objects: objs, Now: deletedAt.Add(time.Minute), Memory: memory}
		g := &decision.Governed{Cluster: mc, Policy: p, Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), mc.Object)}
		return decision.PlanTeardown(g, s)
	}
	signal := object(decision.ManifestWorks, "alive", "", true)
	signal.Meta.Labels = map[string]string{v1alpha1.SignalWorkLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}
	// The signal label alone makes a work no one's: its deletion is told.
	labelled := object(decision.ManifestWorks, "w2", "", true)
	labelled.Meta.Labels = map[string]string{v1alpha1.SignalWorkLabel: "true"}
	atGate := map[schema.GroupVersionResource][]decision.Object{
		configmaps:             {object(configmaps, "app", "", false)},
		addons:                 {object(addons, "a1", "", true), object(addons, "a2", "", false)},
		decision.ManifestWorks: {object(decision.ManifestWorks, "w1", "", true), signal, labelled},
	}

	t.Run("while a gate waits, by someone the API does not name", func(t *testing.T) {
		g := NewWithT(t)
		pl := plan(compile(t, gated), nil, atGate)
		g.Expect(pl.OutOfOrder).To(Equal([]string{"managedclusteraddons.addon.open-cluster-management.io/a1",
			"manifestworks.work.open-cluster-management.io/w1", "manifestworks.work.open-cluster-management.io/w2"}))
		next := pl.Next()
		g.Expect(next.Kind).To(Equal(decision.StepGate))
		g.Expect(next.Report.Reason).To(Equal(v1alpha1.DeletedOutOfOrderReason))
		g.Expect(next.Report.Event).To(Equal(v1alpha1.DeletedOutOfOrderReason))
		g.Expect(next.Report.Message).To(ContainSubstring("the API does not record who deleted them"))
		g.Expect(next.Report.Message).To(ContainSubstring("meanwhile: "))
		g.Expect(pl.Now()).To(BeEmpty(), "the hold writes nothing")
		g.Expect(pl.OutOfOrderHold()).To(ContainSubstring("managedclusteraddons.addon.open-cluster-management.io/a1"))
	})
	t.Run("OCM's resource cleanup, not held: what to check", func(t *testing.T) {
		g := NewWithT(t)
		pl := plan(compile(t, gated), []string{v1alpha1.ClusterCleanupFinalizer, v1alpha1.OCMResourceCleanupFinalizer}, atGate)
		g.Expect(pl.Next().Report.Message).To(ContainSubstring("OCM's resource cleanup runs on this cluster"))
		g.Expect(pl.Next().Report.Message).To(ContainSubstring("if it deleted them"))
		g.Expect(pl.Next().Report.Message).To(ContainSubstring("cleanup-operator-ocm-cleanup-hold"))
		g.Expect(pl.Next().Report.Message).To(ContainSubstring("--ocm-cleanup-users"))
	})
	t.Run("deleted by this process: not reported", func(t *testing.T) {
		g := NewWithT(t)
		pl := plan(compile(t, gated), nil, atGate, "a1", "w1", "w2")
		g.Expect(pl.OutOfOrder).To(BeEmpty())
		g.Expect(pl.Next().Report.Reason).To(Equal(v1alpha1.WaitingForMonitoredResourcesReason))
	})
	t.Run("the stage under way: its objects are the teardown's; a later stage's are not", func(t *testing.T) {
		g := NewWithT(t)
		pl := plan(compile(t, v1alpha1.CleanupPolicySpec{}), nil, map[schema.GroupVersionResource][]decision.Object{
			addons:                 {object(addons, "a1", "", true)},
			decision.ManifestWorks: {object(decision.ManifestWorks, "w1", "", true)},
		})
		g.Expect(pl.Next().Name).To(Equal("addons"))
		g.Expect(pl.OutOfOrder).To(Equal([]string{"manifestworks.work.open-cluster-management.io/w1"}))
	})
	t.Run("an add-on's own works go with it", func(t *testing.T) {
		g := NewWithT(t)
		owned := object(decision.ManifestWorks, "addon-a1-deploy-0", "", true)
		owned.Meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "addon.open-cluster-management.io/v1alpha1",
			Kind: "ManagedClusterAddOn", Name: "a1", UID: "a1"}}
		pl := plan(compile(t, v1alpha1.CleanupPolicySpec{}), nil, map[schema.GroupVersionResource][]decision.Object{
			addons:                 {object(addons, "a1", "", true)},
			decision.ManifestWorks: {owned},
		}, "a1")
		g.Expect(pl.OutOfOrder).To(BeEmpty())
	})
	t.Run("a dry run expects OCM's deletions", func(t *testing.T) {
		g := NewWithT(t)
		dry := gated
		dry.DryRun = true
		g.Expect(plan(compile(t, dry), nil, atGate).OutOfOrder).To(BeEmpty())
	})
}
