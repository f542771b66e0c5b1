package decision_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

func TestDecideProtection(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	compile := func(expr string, dryRun bool) *cel.Policy {
		p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID("p"), Generation: 1},
			Spec: v1alpha1.CleanupPolicySpec{
				RemoveStrategy:     v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
				Variables:          []v1alpha1.Variable{{Name: "env", Expression: "cluster.metadata.labels[?'env'].orValue('')"}},
				DeletionProtection: expr,
				DryRun:             dryRun,
			},
		})
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		return p
	}
	protecting := func(expr string) *cel.Policy { return compile(expr, false) }
	prod := protecting("variables.env == 'prod'")
	failing := protecting("cluster.metadata.labels['tier'] == 'gold'")
	none := protecting("")
	previewProd, previewNone := compile("variables.env == 'prod'", true), compile("", true)

	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	maxAge := time.Hour
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	mc := func(labels, annotations map[string]string) *unstructured.Unstructured {
		u := cluster("c1", "1", labels)
		u.SetAnnotations(annotations)
		return u
	}
	prodLabels := map[string]string{"env": "prod"}
	marked := map[string]string{"env": "dev", v1alpha1.DeletionProtectedLabel: "true"}
	confirmation := func(name, when string) map[string]string {
		return map[string]string{v1alpha1.DeleteConfirmedAnnotation: name, v1alpha1.DeleteConfirmedAtAnnotation: when}
	}

	cases := []struct {
		name      string
		cluster   *unstructured.Unstructured
		policy    *cel.Policy
		held      bool
		protected bool
		errored   bool
		accepted  string
		refused   string
		stamp     string
	}{
		{name: "true protects", cluster: mc(prodLabels, nil), policy: prod, protected: true},
		{name: "false does not", cluster: mc(map[string]string{"env": "dev"}, nil), policy: prod},
		{name: "false takes a mark back", cluster: mc(marked, nil), policy: prod},
		{name: "no expression protects nothing", cluster: mc(marked, nil), policy: none},
		{name: "no policy protects nothing", cluster: mc(marked, nil)},
		{name: "a dry run keeps a mark its expression would take back", cluster: mc(marked, nil), policy: previewProd, protected: true},
		{name: "a dry run without an expression keeps a mark", cluster: mc(marked, nil), policy: previewNone, protected: true},
		{name: "a dry run adds a mark", cluster: mc(prodLabels, nil), policy: previewProd, protected: true},
		{name: "a dry run adds no mark it does not ask for", cluster: mc(map[string]string{"env": "dev"}, nil), policy: previewProd},
		{name: "a dry run accepts a person's confirmation of a kept mark", cluster: mc(marked, confirmation("c1", at(-time.Minute))), policy: previewNone,
			protected: true, accepted: at(-time.Minute)},
		{name: "a run-time error protects", cluster: mc(nil, nil), policy: failing, protected: true, errored: true},
		{name: "a held cluster keeps its mark", cluster: mc(marked, nil), held: true, protected: true},
		{name: "a held cluster gets no mark", cluster: mc(prodLabels, nil), held: true},
		{name: "a fresh confirmation counts", cluster: mc(prodLabels, confirmation("c1", at(-30*time.Minute))), policy: prod,
			protected: true, accepted: at(-30 * time.Minute)},
		{name: "a confirmation a little in the future counts (clock skew)", cluster: mc(prodLabels, confirmation("c1", at(30*time.Second))), policy: prod,
			protected: true, accepted: at(30 * time.Second)},
		{name: "a stale confirmation does not", cluster: mc(prodLabels, confirmation("c1", at(-61*time.Minute))), policy: prod,
			protected: true, refused: "expired"},
		{name: "a confirmation exactly maxAge old does not", cluster: mc(prodLabels, confirmation("c1", at(-time.Hour))), policy: prod,
			protected: true, refused: "expired"},
		{name: "a confirmation far in the future does not", cluster: mc(prodLabels, confirmation("c1", at(time.Hour))), policy: prod,
			protected: true, refused: "in the future"},
		{name: "another cluster's confirmation does not", cluster: mc(prodLabels, confirmation("c2", at(0))), policy: prod,
			protected: true, refused: `is "c2", not the cluster's own name "c1"`},
		{name: "a confirmation by name alone is stamped with when it was seen", cluster: mc(prodLabels, map[string]string{v1alpha1.DeleteConfirmedAnnotation: "c1"}), policy: prod,
			protected: true, stamp: at(0)},
		{name: "a confirmation with an empty time does not", cluster: mc(prodLabels, confirmation("c1", "")), policy: prod,
			protected: true, refused: "is missing"},
		{name: "another cluster's name alone is not stamped", cluster: mc(prodLabels, map[string]string{v1alpha1.DeleteConfirmedAnnotation: "c2"}), policy: prod,
			protected: true, refused: `is "c2", not the cluster's own name "c1"`},
		{name: "an unprotected cluster's name alone is not stamped", cluster: mc(map[string]string{"env": "dev"}, map[string]string{v1alpha1.DeleteConfirmedAnnotation: "c1"}), policy: prod},
		{name: "a held cluster's name alone is not stamped", cluster: mc(marked, map[string]string{v1alpha1.DeleteConfirmedAnnotation: "c1"}), held: true, protected: true},
		{name: "a confirmation with a bad time does not", cluster: mc(prodLabels, confirmation("c1", "yesterday")), policy: prod,
			protected: true, refused: "not a time in RFC 3339"},
		{name: "an unprotected cluster accepts no confirmation", cluster: mc(map[string]string{"env": "dev"}, confirmation("c1", at(0))), policy: prod},
		{name: "a held cluster accepts no new confirmation", cluster: mc(marked, confirmation("c1", at(0))), held: true, protected: true},
		{name: "a held cluster keeps an accepted one while it is valid",
			cluster: mc(marked, withAccepted(confirmation("c1", at(-time.Minute)), at(-time.Minute))), held: true,
			protected: true, accepted: at(-time.Minute)},
		{name: "a held cluster's accepted one expires",
			cluster: mc(marked, withAccepted(confirmation("c1", at(-2*time.Hour)), at(-2*time.Hour))), held: true,
			protected: true, refused: "expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := &decision.Governed{Cluster: tc.cluster, Policy: tc.policy}
			if tc.held {
				g.Policy, g.Held = nil, errors.New("held")
			}
			if g.Policy != nil {
				g.Activation = g.Policy.Bind(context.Background(), cel.NewBudget(1_000_000), tc.cluster.Object)
			}
			got := decision.DecideProtection(g, now, maxAge)
			if got.Protected != tc.protected || (got.Error != "") != tc.errored || got.Held != tc.held {
				t.Fatalf("got %+v, want protected %v, error %v, held %v", got, tc.protected, tc.errored, tc.held)
			}
			if got.Accepted != tc.accepted {
				t.Fatalf("accepted %q, want %q (refused %q)", got.Accepted, tc.accepted, got.Refused)
			}
			if (tc.refused == "") != (got.Refused == "") || !strings.Contains(got.Refused, tc.refused) {
				t.Fatalf("refused %q, want %q", got.Refused, tc.refused)
			}
			if got.Stamp != tc.stamp {
				t.Fatalf("stamp %q, want %q", got.Stamp, tc.stamp)
			}
			if got.Accepted != "" {
				when, _ := time.Parse(time.RFC3339, got.Accepted)
				if got.Expires == nil || !got.Expires.Equal(when.Add(maxAge)) {
					t.Fatalf("expires %v, want %v", got.Expires, when.Add(maxAge))
				}
			}
		})
	}
}

func withAccepted(annotations map[string]string, at string) map[string]string {
	annotations[v1alpha1.DeleteConfirmationAcceptedAnnotation] = at
	return annotations
}
