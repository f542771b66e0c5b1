package decision_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// BenchmarkWorkOrphaning decides one ManifestWork's deleteOption, as the
// operator does for each work of a governed cluster: the work of
// test/bench (one ConfigMap manifest with 512 bytes of data) and its
// orphaning rule, which reads the work's labels. Beside the rule's
// evaluation it measures what the decision converts: the work to an
// unstructured object and each manifest from JSON.
func BenchmarkWorkOrphaning(b *testing.B) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		b.Fatal(err)
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{Spec: v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		Orphaning:      []v1alpha1.OrphaningRule{{Name: "keep", When: "work.metadata.labels[?'tier'].orValue('') == 'a'"}},
	}})
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	manifest := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-0001","namespace":"default"},"data":{"payload":%q}}`, strings.Repeat("x", 512))
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: "w-0001", Namespace: "bench", Labels: map[string]string{"tier": "a"}},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: []byte(manifest)}},
		}}},
	}
	a := p.Bind(context.Background(), cel.NewBudget(math.MaxInt64), nil)
	resourceOf := func(schema.GroupVersionKind) (string, error) { return "configmaps", nil }
	b.ReportAllocs()
	for b.Loop() {
		d, err := decision.WorkOrphaning(p, a, w, resourceOf)
		if err != nil || d.PropagationPolicy != "Orphan" {
			b.Fatal(d, err)
		}
	}
}
