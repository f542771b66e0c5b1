package snapshot

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"

	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
)

// A suspended policy that is being deleted keeps its in-use finalizer (the
// CleanupPolicy reconciler writes nothing while suspended) and the clusters
// its annotation names stay suspended: neither released nor handed to
// another policy that selects them, deleting or not.
func TestSuspendedPolicyBeingDeletedKeepsItsClusters(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	compile := func(name string, suspend bool) *cel.Policy {
		p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Generation: 1},
			Spec: v1alpha1.CleanupPolicySpec{Suspend: suspend, RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}}})
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		return p
	}
	suspended := compile("suspended", true)
	other := compile("other", false) // selects every cluster
	ps := &Policies{
		Ranked:   []*cel.Policy{other},
		Invalid:  map[string]error{},
		deleting: map[string]compiled{"suspended": {policy: suspended}},
	}
	for _, tc := range []struct {
		name   string
		ranked []*cel.Policy
	}{
		{"released: no other policy", nil},
		{"handed over: another policy selects it", []*cel.Policy{other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps.Ranked = tc.ranked
			in := ps.Input(clusterPinnedTo("suspended", false), false)
			g := decision.NewGovernance().Resolve(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), in)
			if g.Suspended == "" {
				gov := "<none: the cluster is released>"
				if g.Policy != nil {
					gov = g.Policy.Name
				}
				t.Fatalf("a cluster pinned to a suspended policy being deleted is not suspended; governor %s", gov)
			}
		})
	}
	// The deleting cluster is covered (Input.Pinned comes from deleting).
	in := ps.Input(clusterPinnedTo("suspended", true), false)
	if g := decision.NewGovernance().Resolve(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), in); g.Suspended == "" {
		t.Fatal("a deleting cluster pinned to a suspended policy being deleted is not suspended")
	}
}

// A suspended policy the operator cannot decode (stored without the
// webhook or under an older CRD: here a timeout that is not positive) is
// invalid, but its spec.suspend, read raw, still suspends the deleting
// cluster its annotation names: suspended wins over the hold, so no held
// report is written for it.
func TestSuspendedInvalidPolicySuspendsItsClusters(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	stored := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": CleanupPolicyGVK.GroupVersion().String(), "kind": CleanupPolicyGVK.Kind,
		"metadata": map[string]any{"name": "bad", "uid": "bad", "generation": int64(1)},
		"spec": map[string]any{"suspend": true,
			"removeStrategy": map[string]any{"default": "Required", "timeout": "-1s"}},
	}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(stored).Build()
	ps, err := CompileAll(context.Background(), c, cel.NewCache(env))
	if err != nil {
		t.Fatal(err)
	}
	if ps.Invalid["bad"] == nil {
		t.Fatalf("the stored policy is expected invalid; ranked %d", len(ps.Ranked))
	}
	in := ps.Input(clusterPinnedTo("bad", true), false)
	g := decision.NewGovernance().Resolve(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), in)
	if g.Suspended == "" {
		t.Fatalf("a deleting cluster pinned to a suspended (but undecodable) policy is not suspended: held (%v), so its held report is written", g.Held)
	}
}
