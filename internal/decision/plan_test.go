package decision_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

func object(gvr schema.GroupVersionResource, name, priority string, deleting bool) decision.Object {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "c1", UID: types.UID(name)}}
	if priority != "" {
		m.Annotations = map[string]string{"open-cluster-management.io/cleanup-priority": priority}
	}
	if deleting {
		now := metav1.Now()
		m.DeletionTimestamp = &now
	}
	value, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	return decision.Object{GVR: gvr, Meta: m, Value: value}
}

func TestPlanCluster(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	addons := schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	spec := v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{
			Default: v1alpha1.RemoveStrategyRequired,
			Rules:   []v1alpha1.StrategyRule{{When: "cluster.metadata.labels[?'tier'].orValue('') == 'sandbox'", Strategy: v1alpha1.RemoveStrategyNeedless}},
		},
		MonitoredResources: []v1alpha1.MonitoredResource{{GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			When: "object.metadata.name.startsWith('hold')"}},
		KeepNamespace: "namespace.metadata.labels[?'keep'].orValue('') == 'true'",
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 3}, Spec: spec})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	objects := map[schema.GroupVersionResource][]decision.Object{
		addons: {object(addons, "a1", "", false)},
		decision.ManifestWorks: {
			object(decision.ManifestWorks, "w-late", "90", false),
			object(decision.ManifestWorks, "w-bad", "high", false),
			object(decision.ManifestWorks, "w-early", "1", true),
			object(decision.ManifestWorks, "w-b", "", false),
			object(decision.ManifestWorks, "w-a", "", false),
		},
		configmaps: {object(configmaps, "hold-1", "", false), object(configmaps, "other", "", false)},
	}

	for _, tc := range []struct {
		name      string
		labels    map[string]any
		nsLabels  map[string]any
		strategy  v1alpha1.RemoveStrategyType
		keep      bool
		orphanAll bool
	}{
		{name: "required, namespace deleted", strategy: v1alpha1.RemoveStrategyRequired},
		{name: "needless by rule, namespace kept", labels: map[string]any{"tier": "sandbox"}, nsLabels: map[string]any{"keep": "true"},
			strategy: v1alpha1.RemoveStrategyNeedless, keep: true, orphanAll: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), map[string]any{
				"metadata": map[string]any{"name": "c1", "labels": tc.labels}})
			ns := map[string]any{"metadata": map[string]any{"name": "c1", "labels": tc.nsLabels}}
			plan, err := decision.PlanCluster(p, a, decision.PlanInput{Cluster: "c1", Available: true, Namespace: ns, Objects: objects})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(plan.Cluster).To(Equal("c1"))
			g.Expect(plan.Policy).To(Equal("p"))
			g.Expect(plan.PolicyGeneration).To(Equal(int64(3)))
			g.Expect(plan.Strategy).To(Equal(tc.strategy))
			g.Expect(plan.OrphanAll).To(Equal(tc.orphanAll))
			g.Expect(plan.Timeout).To(Equal("30m0s")) // the default
			g.Expect(plan.Signal).To(BeNil())
			g.Expect(plan.Gate).To(Equal(decision.GatePlan{Resources: []string{"configmaps"}, Holding: []string{"configmaps/hold-1"}}))
			// The default stages; OCM's order: unset, invalid, then by value.
			g.Expect(plan.Stages).To(Equal([]decision.StagePlan{
				{Name: "addons", Resource: "managedclusteraddons.addon.open-cluster-management.io",
					Groups: []decision.GroupPlan{{Priority: "unset", Objects: []string{"a1"}}}},
				{Name: "manifestworks", Resource: "manifestworks.work.open-cluster-management.io", Groups: []decision.GroupPlan{
					{Priority: "unset", Objects: []string{"w-a", "w-b"}},
					{Priority: "invalid", Objects: []string{"w-bad"}},
					{Priority: "1", Objects: []string{"w-early (deleting)"}},
					{Priority: "90", Objects: []string{"w-late"}},
				}},
			}))
			g.Expect(plan.Namespace).To(Equal(&decision.NamespacePlan{Name: "c1", Keep: tc.keep}))
		})
	}

	t.Run("a failing expression names its field", func(t *testing.T) {
		g := NewWithT(t)
		bad := spec
		bad.KeepNamespace = "namespace.metadata.labels['keep'] == 'true'" // no such key: a run-time error
		p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad", UID: "bad"}, Spec: bad})
		g.Expect(errs).To(BeEmpty())
		a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), map[string]any{"metadata": map[string]any{"name": "c1"}})
		_, err := decision.PlanCluster(p, a, decision.PlanInput{Cluster: "c1", Namespace: map[string]any{"metadata": map[string]any{"name": "c1"}}, Objects: objects})
		g.Expect(err).To(MatchError(ContainSubstring("keepNamespace")))
	})

	t.Run("a namespace not named after the cluster is never planned", func(t *testing.T) {
		for _, ns := range []map[string]any{
			{"metadata": map[string]any{"name": "kube-system"}},
			{"metadata": map[string]any{"name": ""}},
			{"metadata": map[string]any{}},
			{},
		} {
			g := NewWithT(t)
			a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), map[string]any{"metadata": map[string]any{"name": "c1"}})
			plan, err := decision.PlanCluster(p, a, decision.PlanInput{Cluster: "c1", Namespace: ns, Objects: objects})
			g.Expect(err).To(MatchError(ContainSubstring(`is not the namespace of cluster "c1"`)))
			g.Expect(plan).To(BeNil())
		}
	})
}
