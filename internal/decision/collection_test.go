package decision_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestCollectionDeletes: a stage's cleanup-priority group goes in one
// deletecollection, leaving out by name what else of its resource remains
// (at most decision.MaxLeftOut), only when the resource is
// admission-guarded, the namespace labelled, each of the group deleted now,
// no work's deleteOption is the operator's decision, no monitored resource
// is of its resource, and the stage's when reads nothing of an object a
// write can change.
func TestCollectionDeletes(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	addons := schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	works := func(priorities ...string) []decision.Object {
		var out []decision.Object
		for i, p := range priorities {
			name := "w" + string(rune('a'+i))
			if i >= 26 {
				name = fmt.Sprintf("w%03d", i)
			}
			out = append(out, object(decision.ManifestWorks, name, p, false))
		}
		return out
	}
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name      string
		spec      v1alpha1.CleanupPolicySpec
		objects   map[schema.GroupVersionResource][]decision.Object
		nsLabels  map[string]string
		available bool
		// collection are the groups whose deletes are one collection,
		// as stage/group.
		collection []string
	}{
		{name: "every work, one group", objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "", "")},
			collection: []string{"manifestworks/0"}},
		{name: "every add-on, one group", objects: map[schema.GroupVersionResource][]decision.Object{
			addons: {object(addons, "a1", "", false), object(addons, "a2", "", false)}}, collection: []string{"addons/0"}},
		{name: "the namespace not labelled yet: the signal step labels it", nsLabels: map[string]string{},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}, collection: []string{"manifestworks/0"}},
		{name: "one object", objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("")}},
		{name: "a priority split: the first group in one request that leaves the last out; the last, one object, alone",
			objects:    map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "", "10")},
			collection: []string{"manifestworks/0"}},
		{name: "a priority split: the first group, one object, alone; the last, all that remains then, in one request",
			objects:    map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "10", "10")},
			collection: []string{"manifestworks/1"}},
		{name: "a priority split leaving out more than MaxLeftOut: the first group one by one",
			objects:    map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works(append([]string{"", ""}, repeat("10", decision.MaxLeftOut+1)...)...)},
			collection: []string{"manifestworks/1"}},
		{name: "a priority split leaving out MaxLeftOut: each group in one request",
			objects:    map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works(append([]string{"", ""}, repeat("10", decision.MaxLeftOut)...)...)},
			collection: []string{"manifestworks/0", "manifestworks/1"}},
		{name: "one of them being deleted already", objects: map[schema.GroupVersionResource][]decision.Object{
			decision.ManifestWorks: append(works("", ""), object(decision.ManifestWorks, "wz", "", true))}},
		{name: "an orphaning rule decides each work's deleteOption",
			spec:    v1alpha1.CleanupPolicySpec{Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-ns", When: "manifest.kind == 'Namespace'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "a stage filter on the name", spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{{Name: "apps",
			GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
			When:                 "object.metadata.name != 'nope'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}, collection: []string{"apps/0"}},
		{name: "a stage filter on a label: a write could take a work out of the stage", spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{{Name: "apps",
			GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
			When:                 "object.metadata.labels[?'keep'].orValue('') != 'yes'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "two stages of one resource, the first taking none", spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{
			{Name: "first", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
				When: "object.metadata.name == 'nope'"},
			{Name: "rest", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}, collection: []string{"rest/0"}},
		{name: "two stages of one resource, one work kept for last by name: the first stage in one request that leaves it out",
			spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{
				{Name: "first", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
					When: "object.metadata.name != 'wa'"},
				{Name: "rest", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "", "")}, collection: []string{"first/0"}},
		{name: "an earlier stage of the resource whose when reads a label: a write could move a work of the group into it",
			spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{
				{Name: "labelled", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
					When: "object.metadata.labels[?'first'].orValue('') == 'yes'"},
				{Name: "named", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
					When: "object.metadata.name != 'wa'"},
				{Name: "rest", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "", "")}},
		{name: "an earlier stage of another resource whose when reads a label",
			spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{
				{Name: "labelled", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"},
					When: "object.metadata.labels[?'first'].orValue('') == 'yes'"},
				{Name: "named", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
					When: "object.metadata.name != 'wa'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "", "")}, collection: []string{"named/0"}},
		{name: "a resource the admission policy does not guard", spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{
			{Name: "cms", GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}},
			objects: map[schema.GroupVersionResource][]decision.Object{configmaps: {object(configmaps, "c1", "", false), object(configmaps, "c2", "", false)}}},
		{name: "a monitored resource of the stage's resource: a change to a work's metadata could make the gate wait for it",
			spec: v1alpha1.CleanupPolicySpec{MonitoredResources: []v1alpha1.MonitoredResource{{
				GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
				When:                 "object.metadata.labels[?'hold'].orValue('') == 'yes'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "a monitored resource of another version of the stage's resource",
			spec: v1alpha1.CleanupPolicySpec{MonitoredResources: []v1alpha1.MonitoredResource{{
				GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1beta1", Resource: "manifestworks"},
				When:                 "object.metadata.labels[?'hold'].orValue('') == 'yes'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "a monitored resource of another resource", collection: []string{"manifestworks/0"},
			spec: v1alpha1.CleanupPolicySpec{MonitoredResources: []v1alpha1.MonitoredResource{{
				GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"},
				When:                 "object.metadata.labels[?'hold'].orValue('') == 'yes'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "the last priority group, all that remains: a priority only orders the stage's deletes", collection: []string{"manifestworks/0"},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("20", "20")}},
		{name: "BestEffort on an unavailable cluster forces after the delete",
			spec:    v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: withAgentFinalizer(works("", ""))}},
		{name: "BestEffort on an available cluster", available: true,
			spec:       v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort}},
			objects:    map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: withAgentFinalizer(works("", ""))},
			collection: []string{"manifestworks/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			if tc.spec.RemoveStrategy.Default == "" {
				tc.spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyRequired
			}
			p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p"}, Spec: tc.spec})
			g.Expect(errs).To(BeEmpty())
			mc := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "c1", "uid": "c1"}}}
			mc.SetDeletionTimestamp(&deleted)
			if tc.available {
				mc.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "ManagedClusterConditionAvailable", "status": "True",
					"reason": "Available", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}
			}
			labels := tc.nsLabels
			if labels == nil {
				labels = map[string]string{v1alpha1.ClusterDeletingLabel: "true"}
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "ns", Labels: ocmLabelled(labels, "c1")}}
			s := &decision.Snapshot{Cluster: mc, Namespace: ns, Objects: tc.objects, Now: deleted.Add(time.Minute)}
			plan := decision.PlanTeardown(&decision.Governed{Cluster: mc, Policy: p,
				Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), mc.Object)}, s)
			g.Expect(plan.Held).To(BeEmpty())
			var collected []string
			for _, st := range plan.Steps {
				for _, a := range st.Actions {
					group := fmt.Sprintf("%s/%d", st.Name, a.Group)
					if a.Collection {
						g.Expect(a.Verb).To(Equal(decision.VerbDelete), "%s %s", st.Name, a.Name)
						if !slices.Contains(collected, group) {
							collected = append(collected, group)
						}
					}
					g.Expect(a.Collection).To(Equal(slices.Contains(collected, group)), "every delete of a group collected, or none: %s", a.Name)
				}
			}
			g.Expect(collected).To(Equal(tc.collection))
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func withAgentFinalizer(objs []decision.Object) []decision.Object {
	for i := range objs {
		objs[i].Meta.Finalizers = []string{v1alpha1.WorkAgentFinalizer}
	}
	return objs
}
