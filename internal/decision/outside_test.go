package decision_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestAssignStagesOutside: a stage outside the cluster namespace takes,
// at its places only, the objects its when selects; a stage in the
// cluster namespace of the same resource never sees them.
func TestAssignStagesOutside(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	spec := v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		DeletionStages: []v1alpha1.DeletionStage{
			{Name: "local", GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"}},
			{Name: "argocd", Namespaces: []string{"argocd"}, GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"},
				When: "object.metadata.labels[?'apps.open-cluster-management.io/cluster-name'].orValue('') == cluster.metadata.name"},
		},
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: spec})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	secret := func(ns, name, cluster string) decision.Object {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
			Labels: map[string]string{"apps.open-cluster-management.io/cluster-name": cluster}}}
		m.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"})
		return decision.Object{GVR: secrets, Meta: m, Outside: ns != "c1"}
	}
	byGVR := map[schema.GroupVersionResource][]decision.Object{secrets: {secret("c1", "own", "")}}
	outside := map[decision.Place][]decision.Object{
		{GVR: secrets, Namespace: "argocd"}: {secret("argocd", "cluster-c1", "c1"), secret("argocd", "cluster-c2", "c2")},
		{GVR: secrets, Namespace: "other"}:  {secret("other", "cluster-c1", "c1")},
	}
	if got := decision.Places(p); len(got) != 1 || got[0] != (decision.Place{GVR: secrets, Namespace: "argocd"}) {
		t.Fatalf("places %v, want only secrets in argocd", got)
	}
	if got := decision.Resources(p); len(got) != 1 || got[0] != secrets {
		t.Fatalf("resources read in the cluster namespace %v, want secrets (for the local stage)", got)
	}
	mc := map[string]any{"metadata": map[string]any{"name": "c1", "uid": "c1"}}
	a := p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), mc)
	assigned, err := decision.AssignStages(p, a, decision.Stages(p), byGVR, outside, nil)
	if err != nil {
		t.Fatal(err)
	}
	if keys := decision.Keys(assigned[0]); len(keys) != 1 || keys[0] != "secrets/own" {
		t.Errorf("local stage %v, want [secrets/own]", keys)
	}
	if keys := decision.Keys(assigned[1]); len(keys) != 1 || keys[0] != "secrets/argocd/cluster-c1" {
		t.Errorf("argocd stage %v, want [secrets/argocd/cluster-c1]", keys)
	}
}

// TestAgentDeleting: the work agent's Deleting condition, described; none
// without it.
func TestAgentDeleting(t *testing.T) {
	w := &workv1.ManifestWork{}
	if got := decision.AgentDeleting(w); got != "" {
		t.Fatalf("got %q without a condition", got)
	}
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkDeleting, Status: metav1.ConditionTrue, Reason: "WorkDeleting",
		Message: "ManifestWork is being deleted", LastTransitionTime: metav1.Unix(0, 0)}}
	if got, want := decision.AgentDeleting(w), "Deleting=True since 1970-01-01T00:00:00Z (WorkDeleting: ManifestWork is being deleted)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
