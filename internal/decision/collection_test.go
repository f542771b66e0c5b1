package decision_test

import (
	"context"
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

// TestCollectionDeletes: a stage's group goes in one deletecollection only
// when it is the stage's last cleanup-priority group, so every object of an
// admission-guarded resource that remains once the groups before it are
// gone, in a labelled namespace, each deleted now, no work's deleteOption
// is the operator's decision, and no monitored resource is of its resource.
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
			out = append(out, object(decision.ManifestWorks, "w"+string(rune('a'+i)), p, false))
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
		// collection is the stage whose deletes are one collection; "" none.
		collection string
	}{
		{name: "every work, one group", objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "", "")},
			collection: "manifestworks"},
		{name: "every add-on, one group", objects: map[schema.GroupVersionResource][]decision.Object{
			addons: {object(addons, "a1", "", false), object(addons, "a2", "", false)}}, collection: "addons"},
		{name: "the namespace not labelled yet: the signal step labels it", nsLabels: map[string]string{},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}, collection: "manifestworks"},
		{name: "one object", objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("")}},
		{name: "a priority split whose last group is one object",
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "", "10")}},
		{name: "a priority split: the first group is a subset, deleted one by one; the last, all that remains then, in one request",
			objects:    map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "10", "10")},
			collection: "manifestworks"},
		{name: "one of them being deleted already", objects: map[schema.GroupVersionResource][]decision.Object{
			decision.ManifestWorks: append(works("", ""), object(decision.ManifestWorks, "wz", "", true))}},
		{name: "an orphaning rule decides each work's deleteOption",
			spec:    v1alpha1.CleanupPolicySpec{Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-ns", When: "manifest.kind == 'Namespace'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "a stage filter", spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{{Name: "apps",
			GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
			When:                 "object.metadata.name != 'nope'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "two stages of one resource", spec: v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{
			{Name: "first", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"},
				When: "object.metadata.name == 'nope'"},
			{Name: "rest", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
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
		{name: "a monitored resource of another resource", collection: "manifestworks",
			spec: v1alpha1.CleanupPolicySpec{MonitoredResources: []v1alpha1.MonitoredResource{{
				GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"},
				When:                 "object.metadata.labels[?'hold'].orValue('') == 'yes'"}}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("", "")}},
		{name: "the last priority group, all that remains: a priority only orders the stage's deletes", collection: "manifestworks",
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: works("20", "20")}},
		{name: "BestEffort on an unavailable cluster forces after the delete",
			spec:    v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort}},
			objects: map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: withAgentFinalizer(works("", ""))}},
		{name: "BestEffort on an available cluster", available: true,
			spec:       v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort}},
			objects:    map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: withAgentFinalizer(works("", ""))},
			collection: "manifestworks"},
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
			collected := ""
			for _, st := range plan.Steps {
				for _, a := range st.Actions {
					if a.Collection {
						g.Expect(a.Verb).To(Equal(decision.VerbDelete), "%s %s", st.Name, a.Name)
						g.Expect(collected).To(Or(BeEmpty(), Equal(st.Name)))
						collected = st.Name
					}
				}
				if st.Name == collected && collected != "" {
					last := st.Actions[len(st.Actions)-1].Group
					for _, a := range st.Actions {
						g.Expect(a.Collection).To(Equal(a.Group == last),
							"every delete of the stage's last priority group, and none of the groups before it: %s", a.Name)
					}
				}
			}
			g.Expect(collected).To(Equal(tc.collection))
		})
	}
}

func withAgentFinalizer(objs []decision.Object) []decision.Object {
	for i := range objs {
		objs[i].Meta.Finalizers = []string{v1alpha1.WorkAgentFinalizer}
	}
	return objs
}
