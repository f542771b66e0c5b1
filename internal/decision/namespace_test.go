package decision_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// ocmLabelled is labels with OCM's cluster-name label naming cluster, as
// OCM's registration labels the namespace it makes for a cluster.
func ocmLabelled(labels map[string]string, cluster string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[decision.OCMClusterNameLabel] = cluster
	return out
}

func TestNamespaceKept(t *testing.T) {
	born := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cluster := &metav1.ObjectMeta{Name: "c1", CreationTimestamp: metav1.NewTime(born)}
	ns := func(name string, created time.Time, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created), Labels: labels}}
	}
	named := func(n string) *metav1.ObjectMeta {
		c := cluster.DeepCopy()
		c.Name = n
		return c
	}
	deny := decision.NamespaceDenyList("cleanup-operator-system", []string{"argocd", "team-*"})
	for _, tc := range []struct {
		name    string
		ns      *corev1.Namespace
		cluster *metav1.ObjectMeta
		deny    []string
		kept    string // a part of the reason; empty: deleted
	}{
		{"made by OCM after the cluster", ns("c1", born.Add(time.Second), ocmLabelled(nil, "c1")), cluster, deny, ""},
		{"made in the cluster's second", ns("c1", born, ocmLabelled(nil, "c1")), cluster, deny, ""},
		{"older than the cluster", ns("c1", born.Add(-time.Second), ocmLabelled(nil, "c1")), cluster, deny, "created at 2026-03-01T09:59:59Z, before the ManagedCluster (2026-03-01T10:00:00Z)"},
		{"no OCM label", ns("c1", born, nil), cluster, deny, "does not carry OCM's label open-cluster-management.io/cluster-name=c1"},
		{"OCM label naming another cluster", ns("c1", born, ocmLabelled(nil, "c2")), cluster, deny, "does not carry OCM's label"},
		{"default", ns("default", born, ocmLabelled(nil, "default")), named("default"), deny, `on the deny list ("default")`},
		{"kube-system", ns("kube-system", born, ocmLabelled(nil, "kube-system")), named("kube-system"), deny, `("kube-*")`},
		{"openshift-config", ns("openshift-config", born, ocmLabelled(nil, "openshift-config")), named("openshift-config"), deny, `("openshift-*")`},
		{"open-cluster-management-hub", ns("open-cluster-management-hub", born, ocmLabelled(nil, "open-cluster-management-hub")),
			named("open-cluster-management-hub"), deny, `("open-cluster-management*")`},
		{"the operator's own", ns("cleanup-operator-system", born, ocmLabelled(nil, "cleanup-operator-system")),
			named("cleanup-operator-system"), deny, `("cleanup-operator-system")`},
		{"a flag's name", ns("argocd", born, ocmLabelled(nil, "argocd")), named("argocd"), deny, `("argocd")`},
		{"a flag's pattern", ns("team-a", born, ocmLabelled(nil, "team-a")), named("team-a"), deny, `("team-*")`},
		{"not matched by a pattern's prefix only", ns("kube", born, ocmLabelled(nil, "kube")), named("kube"), deny, ""},
		{"defaults without a list", ns("kube-public", born, ocmLabelled(nil, "kube-public")), named("kube-public"), nil, ""},
		{"a malformed pattern keeps all", ns("c1", born, ocmLabelled(nil, "c1")), cluster, []string{"["}, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decision.NamespaceKept(tc.ns, tc.cluster, tc.deny)
			switch {
			case tc.kept == "" && got != "":
				t.Fatalf("kept: %s", got)
			case tc.kept != "" && !strings.Contains(got, tc.kept):
				t.Fatalf("reason %q, want it to contain %q", got, tc.kept)
			}
		})
	}
	// nil deny is not "no deny list" in the decision: the plan uses the
	// defaults (DefaultNamespaceDeny) then; NamespaceKept with nil checks
	// none, which the case above shows.
}

// TestPlanKeepsANamespaceOCMDidNotMake: the teardown of a cluster named
// like an older namespace keeps it, takes its deleting label back, and its
// outcome says why; the plan deletes the namespace OCM made.
func TestPlanKeepsANamespaceOCMDidNotMake(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID("p"), Generation: 1},
		Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}}})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	born := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	plan := func(nsCreated time.Time) *decision.Plan {
		mc := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "argo", "uid": "c1"}}}
		mc.SetCreationTimestamp(metav1.NewTime(born))
		deleted := metav1.NewTime(born.Add(time.Hour))
		mc.SetDeletionTimestamp(&deleted)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argo", UID: "ns", CreationTimestamp: metav1.NewTime(nsCreated),
			Labels: ocmLabelled(map[string]string{v1alpha1.ClusterDeletingLabel: "true"}, "argo")}}
		s := &decision.Snapshot{Cluster: mc, Namespace: ns, Now: deleted.Add(time.Minute)}
		return decision.PlanTeardown(&decision.Governed{Cluster: mc, Policy: p,
			Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), mc.Object)}, s)
	}
	step := func(pl *decision.Plan, kind decision.StepKind) *decision.Step {
		for i := range pl.Steps {
			if pl.Steps[i].Kind == kind {
				return &pl.Steps[i]
			}
		}
		t.Fatalf("no %s step in %+v", kind, pl.Steps)
		return nil
	}

	older := plan(born.Add(-24 * time.Hour))
	acts := step(older, decision.StepNamespace).Actions
	if len(acts) != 1 || acts[0].Verb != decision.VerbUnlabel || !strings.Contains(acts[0].For, "before the ManagedCluster") {
		t.Fatalf("namespace step of an older namespace: %+v", acts)
	}
	if msg := step(older, decision.StepFinish).Report.Message; !strings.Contains(msg, "the namespace was kept: namespace argo was created at") {
		t.Fatalf("outcome: %s", msg)
	}

	made := plan(born)
	acts = step(made, decision.StepNamespace).Actions
	if len(acts) != 1 || acts[0].Verb != decision.VerbDelete {
		t.Fatalf("namespace step of OCM's namespace: %+v", acts)
	}
	if msg := step(made, decision.StepFinish).Report.Message; strings.Contains(msg, "kept") {
		t.Fatalf("outcome: %s", msg)
	}
}
