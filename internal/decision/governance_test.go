package decision_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

func compile(t *testing.T, env *cel.Env, name string, priority int32, selector string) *cel.Policy {
	t.Helper()
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Generation: 1},
		Spec: v1alpha1.CleanupPolicySpec{
			ClusterSelector: selector, Priority: priority,
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		},
	})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return p
}

func cluster(name, rv string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName(name)
	u.SetUID(types.UID(name))
	u.SetResourceVersion(rv)
	u.SetLabels(labels)
	return u
}

func TestSelect(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	all := compile(t, env, "all", 0, "")
	prod := compile(t, env, "prod", 10, "cluster.metadata.labels[?'env'].orValue('') == 'prod'")
	prodToo := compile(t, env, "aprod", 10, "cluster.metadata.labels[?'env'].orValue('') == 'prod'")
	strict := compile(t, env, "strict", 20, "cluster.metadata.labels['tier'] == 'gold'")
	ranked := decision.Ranked([]*cel.Policy{all, prod, prodToo})
	if names := []string{ranked[0].Name, ranked[1].Name, ranked[2].Name}; names[0] != "aprod" || names[1] != "prod" || names[2] != "all" {
		t.Fatalf("ranked %v: want priority first, then name", names)
	}
	// Of equal priority, a policy naming clusters ranks before a catch-all
	// whatever their names: "default" sorts before "try-cleanup".
	catchAll, named := compile(t, env, "default", 0, ""), compile(t, env, "try-cleanup", 0, "cluster.metadata.labels[?'try'].orValue('') == 'true'")
	if ranked := decision.Ranked([]*cel.Policy{catchAll, named}); ranked[0] != named {
		t.Fatalf("ranked %s before %s: want the selector before the catch-all of its priority", ranked[0].Name, ranked[1].Name)
	}
	for _, tc := range []struct {
		ranked []*cel.Policy
		labels map[string]string
		want   string
	}{
		{[]*cel.Policy{catchAll, named}, map[string]string{"try": "true"},
			"matched by try-cleanup, default; try-cleanup names clusters with its selector, default of the same priority is a catch-all"},
		{[]*cel.Policy{catchAll, named}, nil, "matched by default; the only one"},
		{[]*cel.Policy{all, prod, prodToo}, map[string]string{"env": "prod"},
			"matched by aprod, prod, all; aprod and prod tie on priority 10, and aprod has the lower name: give one a higher priority"},
		{[]*cel.Policy{all, prod}, map[string]string{"env": "prod"}, "matched by prod, all; prod has the highest priority (10; all has 0)"},
	} {
		sel := decision.NewGovernance().Select(context.Background(), cel.NewBudget(1_000_000), decision.Ranked(tc.ranked), cluster("why", "1", tc.labels))
		if got := sel.Why(); got != tc.want {
			t.Errorf("Why: got %q, want %q", got, tc.want)
		}
	}
	if decision.Tied(catchAll, named) || !decision.Tied(prod, prodToo) || decision.Tied(all, prod) {
		t.Fatal("Tied: two policies tie only on the same priority, each with a selector or neither")
	}
	if sel := decision.NewGovernance().Select(context.Background(), cel.NewBudget(1_000_000), decision.Ranked([]*cel.Policy{catchAll, named}),
		cluster("tried", "1", map[string]string{"try": "true"})); sel.Governor != named {
		t.Fatalf("governed by %v: want try-cleanup, the selector, over the catch-all default", sel.Governor.Name)
	}

	cases := []struct {
		name     string
		policies []*cel.Policy
		cluster  *unstructured.Unstructured
		governor *cel.Policy
		matched  int
		errors   int
	}{
		{"the highest priority wins", ranked, cluster("c1", "1", map[string]string{"env": "prod"}), prodToo, 3, 0},
		{"the fallback takes the rest", ranked, cluster("c2", "1", map[string]string{"env": "dev"}), all, 1, 0},
		{"a failing higher policy holds the cluster", decision.Ranked([]*cel.Policy{strict, all}), cluster("c3", "1", nil), nil, 1, 1},
		{"a failing lower policy does not", decision.Ranked([]*cel.Policy{strict, all}), cluster("c4", "1", map[string]string{"tier": "gold"}), strict, 2, 0},
		{"no policy", nil, cluster("c5", "1", nil), nil, 0, 0},
	}
	g := decision.NewGovernance()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := g.Select(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), tc.policies, tc.cluster)
			if r.Governor != tc.governor || len(r.Matched) != tc.matched || len(r.Errors) != tc.errors {
				t.Fatalf("governor %v, %d matched, %d errors; want %v, %d, %d",
					r.Governor, len(r.Matched), len(r.Errors), tc.governor, tc.matched, tc.errors)
			}
		})
	}
}

func TestMemoKeepsResultsUntilSomethingChanges(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	p := compile(t, env, "prod", 0, "cluster.metadata.labels[?'env'].orValue('') == 'prod'")
	g := decision.NewGovernance()
	budget := cel.NewBudget(cel.ReconcileCostBudget)
	c := cluster("c", "1", map[string]string{"env": "prod"})
	for range 100 {
		if !g.Match(context.Background(), budget, p, c).Matched {
			t.Fatal("not matched")
		}
	}
	if n := g.Evaluations(); n != 1 {
		t.Fatalf("%d evaluations of an unchanged cluster, want 1", n)
	}
	changed := cluster("c", "2", map[string]string{"env": "dev"})
	if g.Match(context.Background(), budget, p, changed).Matched {
		t.Fatal("a changed cluster kept the old result")
	}
	g.Forget(func(types.UID, int64, types.UID) bool { return false })
	g.Match(context.Background(), budget, p, changed)
	if n := g.Evaluations(); n != 3 {
		t.Fatalf("%d evaluations, want 3", n)
	}

	// An exhausted budget says nothing about the cluster: not remembered.
	empty := cel.NewBudget(0)
	if m := g.Match(context.Background(), empty, p, cluster("d", "1", nil)); m.Err == nil || !cel.Transient(m.Err) {
		t.Fatalf("got %+v, want a transient error", m)
	}
	if m := g.Match(context.Background(), budget, p, cluster("d", "1", nil)); m.Err != nil {
		t.Fatalf("the transient error was remembered: %v", m.Err)
	}
}
