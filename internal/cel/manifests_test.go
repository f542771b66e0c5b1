package cel_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// TestReadsManifests: a policy reads manifests when one of its orphaning
// rules reads more of a manifest than its identity, or the work's workload;
// anything it cannot prove otherwise counts as reading.
func TestReadsManifests(t *testing.T) {
	for _, tc := range []struct {
		rules []string
		reads bool
	}{
		{nil, false},
		{[]string{"work.metadata.labels[?'keep'].orValue('') == 'yes'"}, false},
		{[]string{"manifest.kind == 'Namespace'"}, false},
		{[]string{"manifest.apiVersion == 'v1' && manifest.metadata.name.startsWith('keep-')"}, false},
		{[]string{"has(manifest.metadata.namespace) && manifest['metadata']['namespace'] == 'default'"}, false},
		{[]string{"manifest.?metadata.?name.orValue('') == 'a'"}, false},
		{[]string{"work.spec.deleteOption.propagationPolicy == 'Orphan'", "work.status.conditions.exists(c, c.type == 'Applied')"}, false},
		{[]string{"cluster.metadata.name == 'c1'", "variables.keep"}, false},

		{[]string{"manifest.kind == 'Namespace'", "manifest.data.payload == 'x'"}, true},
		{[]string{"manifest.metadata.labels[?'keep'].orValue('') == 'yes'"}, true},
		{[]string{"has(manifest.metadata)"}, true},
		{[]string{"manifest == {}"}, true},
		{[]string{"size(manifest) > 3"}, true},
		{[]string{"manifest.exists(k, k == 'spec')"}, true},
		{[]string{"manifest[variables.field] == 'x'"}, true},
		{[]string{"work.spec.workload.manifests.size() > 1"}, true},
		{[]string{"has(work.spec.workload)"}, true},
		{[]string{"work.spec == work.spec"}, true},
		{[]string{"work == work"}, true},
		{[]string{"work.spec.?workload.hasValue()"}, true},
	} {
		p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
			Variables:      []v1alpha1.Variable{{Name: "keep", Expression: "true"}, {Name: "field", Expression: "'data'"}},
		}}
		for i, r := range tc.rules {
			p.Spec.Orphaning = append(p.Spec.Orphaning, v1alpha1.OrphaningRule{Name: string(rune('a' + i)), When: r})
		}
		compiled, errs := cel.Compile(typedEnv(t), p)
		if len(errs) > 0 {
			t.Fatalf("%q: %v", tc.rules, errs)
		}
		if got := compiled.ReadsManifests(); got != tc.reads {
			t.Errorf("%q: ReadsManifests() = %v, want %v", tc.rules, got, tc.reads)
		}
	}
}

// TestReadsOnlyPaths: a stage's when reads only the named fields of the
// object when every use of it selects one of them, or a field within one;
// anything it cannot prove otherwise reads more.
func TestReadsOnlyPaths(t *testing.T) {
	immutable := [][]string{{"metadata", "name"}, {"metadata", "uid"}}
	for _, tc := range []struct {
		when string
		only bool
	}{
		{"object.metadata.name != 'klusterlet'", true},
		{"object.metadata.name.startsWith('app-') && object.metadata.uid != ''", true},
		{"object.?metadata.?name.orValue('') == 'a'", true},
		{"has(object.metadata.name) && cluster.metadata.labels[?'env'].orValue('') == 'prod'", true},
		{"cluster.metadata.name == 'c1'", true},

		{"object.metadata.labels[?'keep'].orValue('') == 'yes'", false},
		{"object.metadata.annotations['open-cluster-management.io/cleanup-priority'] == '10'", false},
		{"has(object.metadata)", false},
		{"object.metadata.name == object.metadata.generateName", false},
		{"object == object", false},
		{"[object.metadata].exists(m, m.name == 'a')", false},
		{"object.metadata.ownerReferences.exists(r, r.name == 'a')", false},
	} {
		p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
			DeletionStages: []v1alpha1.DeletionStage{{Name: "s", When: tc.when,
				GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}},
		}}
		compiled, errs := cel.Compile(typedEnv(t), p)
		if len(errs) > 0 {
			t.Fatalf("%q: %v", tc.when, errs)
		}
		if got := compiled.StageWhen[0].ReadsOnlyPaths(cel.VarObject, immutable...); got != tc.only {
			t.Errorf("%q: ReadsOnlyPaths() = %v, want %v", tc.when, got, tc.only)
		}
	}
}
