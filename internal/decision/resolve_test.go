package decision_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

func pinnedTo(c *unstructured.Unstructured, policy string, deleting bool) *unstructured.Unstructured {
	c.SetAnnotations(map[string]string{v1alpha1.GoverningPolicyAnnotation: policy})
	if deleting {
		now := metav1.Now()
		c.SetDeletionTimestamp(&now)
	}
	return c
}

func TestResolveGoverns(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	all := compile(t, env, "all", 0, "")
	lowAll := compile(t, env, "low-all", -5, "")
	prod := compile(t, env, "prod", 10, "cluster.metadata.labels[?'env'].orValue('') == 'prod'")
	strict := compile(t, env, "strict", 20, "cluster.metadata.labels['tier'] == 'gold'")
	old := compile(t, env, "old", 30, "cluster.metadata.labels[?'env'].orValue('') == 'old'")
	ranked := decision.Ranked([]*cel.Policy{all, prod, lowAll})
	broken := errors.New("spec.clusterSelector: undefined field")
	prodCluster := func(name string) *unstructured.Unstructured {
		return cluster(name, "1", map[string]string{"env": "prod"})
	}

	cases := []struct {
		name     string
		in       decision.Input
		governor *cel.Policy
		held     string // a substring of the hold; "" for none
		selected bool
	}{
		{name: "the selectors decide", in: decision.Input{Cluster: prodCluster("c1"), Ranked: ranked},
			governor: prod, selected: true},
		{name: "a deleting cluster stays with the policy named in its annotation",
			in:       decision.Input{Cluster: pinnedTo(prodCluster("c2"), "old", true), Ranked: ranked, Pinned: old},
			governor: old},
		{name: "a deleting cluster whose named policy does not compile is held",
			in:   decision.Input{Cluster: pinnedTo(prodCluster("c3"), "old", true), Ranked: ranked, PinnedErr: broken},
			held: "CleanupPolicy old, which governs this cluster, does not compile"},
		{name: "a deleting cluster whose named policy is gone goes to the selectors",
			in:       decision.Input{Cluster: pinnedTo(prodCluster("c4"), "gone", true), Ranked: ranked},
			governor: prod, selected: true},
		{name: "a cluster not being deleted is not pinned",
			in:       decision.Input{Cluster: pinnedTo(prodCluster("c5"), "old", false), Ranked: ranked, Pinned: old},
			governor: prod, selected: true},
		{name: "a cluster whose governing policy became invalid is held, not released",
			in:   decision.Input{Cluster: pinnedTo(prodCluster("c6"), "old", false), Ranked: ranked, Invalid: map[string]error{"old": broken}},
			held: "CleanupPolicy old, which governs this cluster, does not compile"},
		{name: "a failing selector ranked first holds the cluster",
			in:   decision.Input{Cluster: cluster("c7", "1", nil), Ranked: decision.Ranked([]*cel.Policy{strict, all})},
			held: "CleanupPolicy strict: ", selected: true},
		{name: "a failing selector ranked after the governor does not",
			in:       decision.Input{Cluster: cluster("c8", "1", map[string]string{"tier": "gold"}), Ranked: decision.Ranked([]*cel.Policy{strict, all})},
			governor: strict, selected: true},
		{name: "standalone: the highest priority with no selector, with cluster null",
			in:       decision.Input{Standalone: true, Ranked: decision.Ranked([]*cel.Policy{strict, lowAll, prod, all})},
			governor: all},
		{name: "no cluster and not standalone: nothing governs",
			in: decision.Input{Ranked: ranked}},
		{name: "standalone with no selector-less policy: nothing governs",
			in: decision.Input{Standalone: true, Ranked: []*cel.Policy{prod}}},
	}
	g := decision.NewGovernance()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := g.Resolve(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), tc.in)
			if got.Policy != tc.governor {
				t.Fatalf("governed by %v, want %v", name(got.Policy), name(tc.governor))
			}
			switch {
			case tc.held == "" && got.Held != nil:
				t.Fatalf("held: %v", got.Held)
			case tc.held != "" && (got.Held == nil || !strings.Contains(got.Held.Error(), tc.held)):
				t.Fatalf("held %v, want a hold saying %q", got.Held, tc.held)
			}
			if (got.Selection != nil) != tc.selected {
				t.Fatalf("selection %+v, want evaluated: %v", got.Selection, tc.selected)
			}
			if got.Cluster != tc.in.Cluster {
				t.Fatal("the cluster is not the one read")
			}
			if got.Policy != nil && got.Activation == nil {
				t.Fatal("a governed cluster has no activation")
			}
		})
	}
}

func name(p *cel.Policy) string {
	if p == nil {
		return "<none>"
	}
	return p.Name
}
