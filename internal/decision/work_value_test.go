package decision_test

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestWorkValueReadsWhatTheRulesRead: where every orphaning rule reads only
// the work's type and metadata, the work is bound with only those, exactly
// as the whole work's conversion has them; a rule that reads anything else
// of the work, or the work whole, gets all of it.
func TestWorkValueReadsWhatTheRulesRead(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	works := []*workv1.ManifestWork{
		{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "c1"}},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: "c1", UID: "u1", ResourceVersion: "7", Generation: 3,
				Labels: map[string]string{"tier": "a", "": ""}, Annotations: map[string]string{"x/y": ""},
				Finalizers: []string{"cluster.open-cluster-management.io/manifest-work-cleanup"}, CreationTimestamp: now, DeletionTimestamp: &now,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "o", UID: "u"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationApply, Time: &now}}},
			Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`)}}}},
				DeleteOption: &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeOrphan}},
		},
	}
	cases := []struct {
		rules        []string
		metadataOnly bool
	}{
		{[]string{"work.metadata.labels[?'tier'].orValue('') == 'a'"}, true},
		{[]string{"manifest.kind == 'ConfigMap'", "work.kind == 'ManifestWork' && has(work.metadata.deletionTimestamp)"}, true},
		{[]string{"manifest.kind == 'ConfigMap'"}, true},
		{[]string{"work.metadata.name == 'a'", "has(work.spec.deleteOption)"}, false},
		{[]string{"work.spec.workload.manifests.exists(m, m.kind == 'ConfigMap')"}, false},
		{[]string{"size(work) > 2"}, false},
		{[]string{"work['metadata'].name == 'a'"}, false},
		{[]string{"has(work.status)"}, false},
	}
	for _, tc := range cases {
		var rules []v1alpha1.OrphaningRule
		for i, r := range tc.rules {
			rules = append(rules, v1alpha1.OrphaningRule{Name: string(rune('a' + i)), When: r})
		}
		p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{Spec: v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}, Orphaning: rules}})
		if len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		for _, w := range works {
			whole, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
			if err != nil {
				t.Fatal(err)
			}
			whole["apiVersion"], whole["kind"] = "work.open-cluster-management.io/v1", "ManifestWork"
			got, err := decision.WorkValue(p, w)
			if err != nil {
				t.Fatal(err)
			}
			want := whole
			if tc.metadataOnly {
				want = map[string]any{"apiVersion": whole["apiVersion"], "kind": whole["kind"], "metadata": whole["metadata"]}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%v on %s:\n got %v\nwant %v", tc.rules, w.Name, got, want)
			}
		}
	}
}
