package decision_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// reviewFleet is a deleting cluster with n works, each with one ConfigMap
// manifest, none orphaned yet, and a policy with one orphaning rule.
func reviewFleet(t *testing.T, n int) (*cel.Policy, *decision.Snapshot) {
	t.Helper()
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		Orphaning:      []v1alpha1.OrphaningRule{{Name: "keep-cm", When: "manifest.kind == 'ConfigMap' && manifest.metadata.name.startsWith('keep')"}},
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 1}, Spec: spec})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mc := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "c1", "uid": "c1"}}}
	mc.SetDeletionTimestamp(&deleted)
	s := &decision.Snapshot{Cluster: mc, Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "ns", Labels: ocmLabelled(nil, "c1")}},
		Objects: map[schema.GroupVersionResource][]decision.Object{}, Works: map[types.UID]*workv1.ManifestWork{},
		Unserved: map[schema.GroupVersionResource]bool{}, Now: deleted.Add(time.Minute),
		ResourceOf: func(gvk schema.GroupVersionKind) (string, error) { return "configmaps", nil }}
	for i := range n {
		name := fmt.Sprintf("w%03d", i)
		o := object(decision.ManifestWorks, name, "", false)
		w := &workv1.ManifestWork{ObjectMeta: o.Meta.ObjectMeta}
		w.Generation = 1
		raw, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "keep-" + name, "namespace": "default"}})
		w.Spec.Workload.Manifests = []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}
		s.Objects[decision.ManifestWorks] = append(s.Objects[decision.ManifestWorks], o)
		s.Works[o.Meta.UID] = w
	}
	return p, s
}

// TestReviewPlanEvaluatesOrphaningOncePerWork: the operator's reconcile
// budget is shared by every decision of one plan. PlanTeardown evaluates
// each work's orphaning rules twice (workPlans, for people, then the
// orphaning step), so a cluster whose rules fit the budget once (as they
// did with the previous implementation) now exhausts it and is held.
func TestReviewPlanEvaluatesOrphaningOncePerWork(t *testing.T) {
	p, s := reviewFleet(t, 50)
	once := cel.NewBudget(cel.ReconcileCostBudget)
	a := p.Bind(context.Background(), once, s.Cluster.Object)
	for _, w := range s.Works {
		if _, err := decision.WorkOrphaning(p, a, w, s.ResourceOf); err != nil {
			t.Fatal(err)
		}
	}
	spentOnce := cel.ReconcileCostBudget - once.Remaining()

	plan := cel.NewBudget(cel.ReconcileCostBudget)
	g := &decision.Governed{Cluster: s.Cluster, Policy: p, Activation: p.Bind(context.Background(), plan, s.Cluster.Object)}
	decision.PlanTeardown(g, s)
	spentPlan := cel.ReconcileCostBudget - plan.Remaining()
	t.Logf("one evaluation per work: %d; PlanTeardown: %d", spentOnce, spentPlan)
	if spentPlan > spentOnce {
		t.Errorf("PlanTeardown spent %d of the reconcile budget on orphaning, %d more than one evaluation per work (%d)", spentPlan, spentPlan-spentOnce, spentOnce)
	}
}
