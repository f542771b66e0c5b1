package decision_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

func object(gvr schema.GroupVersionResource, name, priority string, deleting bool) decision.Object {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "c1", UID: types.UID(name)}}
	if priority != "" {
		m.Annotations = map[string]string{"open-cluster-management.io/cleanup-priority": priority}
	}
	if deleting {
		now := metav1.Now()
		m.DeletionTimestamp = &now
	}
	value, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	return decision.Object{GVR: gvr, Meta: m, Value: value}
}

func TestPlanTeardown(t *testing.T) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	addons := schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	spec := v1alpha1.CleanupPolicySpec{
		RemoveStrategy: v1alpha1.RemoveStrategy{
			Default: v1alpha1.RemoveStrategyRequired,
			Rules:   []v1alpha1.StrategyRule{{When: "cluster.metadata.labels[?'tier'].orValue('') == 'sandbox'", Strategy: v1alpha1.RemoveStrategyNeedless}},
		},
		MonitoredResources: []v1alpha1.MonitoredResource{{GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			When: "object.metadata.name.startsWith('hold')"}},
		KeepNamespace: "namespace.metadata.labels[?'keep'].orValue('') == 'true'",
	}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 3}, Spec: spec})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	objects := map[schema.GroupVersionResource][]decision.Object{
		addons: {object(addons, "a1", "", false)},
		decision.ManifestWorks: {
			object(decision.ManifestWorks, "w-late", "90", false),
			object(decision.ManifestWorks, "w-bad", "high", false),
			object(decision.ManifestWorks, "w-early", "1", true),
			object(decision.ManifestWorks, "w-b", "", false),
			object(decision.ManifestWorks, "w-a", "", false),
		},
		configmaps: {object(configmaps, "hold-1", "", false), object(configmaps, "other", "", false)},
	}

	snapshot := func(clusterLabels, nsLabels map[string]any, nsName string) *decision.Snapshot {
		deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		mc := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "c1", "labels": clusterLabels, "uid": "c1"}}}
		mc.SetDeletionTimestamp(&deleted)
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"metadata": map[string]any{
			"name": nsName, "uid": "ns", "labels": nsLabels}}, ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels = ocmLabelled(ns.Labels, nsName)
		return &decision.Snapshot{Cluster: mc, Namespace: ns, Objects: objects, Now: deleted.Add(time.Minute)}
	}
	governed := func(p *cel.Policy, s *decision.Snapshot) *decision.Governed {
		return &decision.Governed{Cluster: s.Cluster, Policy: p,
			Activation: p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), s.Cluster.Object)}
	}

	for _, tc := range []struct {
		name     string
		labels   map[string]any
		nsLabels map[string]any
		strategy v1alpha1.RemoveStrategyType
		keep     bool
	}{
		{name: "required, namespace deleted", strategy: v1alpha1.RemoveStrategyRequired},
		{name: "needless by rule, namespace kept", labels: map[string]any{"tier": "sandbox"}, nsLabels: map[string]any{"keep": "true"},
			strategy: v1alpha1.RemoveStrategyNeedless, keep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			nsLabels := map[string]any{v1alpha1.ClusterDeletingLabel: "true"}
			for k, v := range tc.nsLabels {
				nsLabels[k] = v
			}
			s := snapshot(tc.labels, nsLabels, "c1")
			plan := decision.PlanTeardown(governed(p, s), s)
			g.Expect(plan.Cluster).To(Equal("c1"))
			g.Expect(plan.Policy).To(Equal("p"))
			g.Expect(plan.PolicyGeneration).To(Equal(int64(3)))
			g.Expect(plan.Strategy).To(Equal(tc.strategy))
			g.Expect(plan.Timeout).To(Equal("30m0s")) // the default
			g.Expect(plan.Held).To(BeEmpty())
			var kinds []string
			for _, st := range plan.Steps {
				kinds = append(kinds, string(st.Kind)+"/"+st.Name+"/"+string(st.State))
			}
			g.Expect(kinds).To(Equal([]string{"orphaning//done", "signal//done", "gate//next",
				"stage/addons/later", "stage/manifestworks/later", "namespace/c1/later", "finish//later"}))
			gate := plan.Next()
			g.Expect(gate.Actions).To(HaveLen(1))
			g.Expect(gate.Actions[0]).To(MatchFields(IgnoreExtras, Fields{"Verb": Equal(decision.VerbWait), "Resource": Equal("configmaps"), "Name": Equal("hold-1")}))
			// w-early is being deleted before its stage: not by the teardown.
			g.Expect(plan.OutOfOrder).To(Equal([]string{"manifestworks.work.open-cluster-management.io/w-early"}))
			g.Expect(gate.Report.Reason).To(Equal(v1alpha1.DeletedOutOfOrderReason))
			g.Expect(gate.Report.Message).To(ContainSubstring("meanwhile: "))
			g.Expect(gate.Report.Message).To(ContainSubstring("configmaps/hold-1"))
			g.Expect(plan.Now()).To(BeEmpty(), "the gate deletes nothing")
			// The default stages; OCM's order: unset, invalid, then by value.
			var works []string
			for _, a := range plan.Steps[4].Actions {
				works = append(works, fmt.Sprintf("%d %s %s %s", a.Group, a.Priority, a.Verb, a.Name))
			}
			g.Expect(works).To(Equal([]string{"0 unset delete w-a", "0 unset delete w-b", "1 invalid delete w-bad",
				"2 1 wait w-early", "3 90 delete w-late"}))
			ns := plan.Steps[5].Actions[0]
			if tc.keep {
				g.Expect(ns.Verb).To(Equal(decision.VerbUnlabel))
			} else {
				g.Expect(ns.Verb).To(Equal(decision.VerbDelete))
			}
			g.Expect(plan.Steps[6].Actions[0].Verb).To(Equal(decision.VerbRemoveFinalizer))
		})
	}

	t.Run("BestEffort on an unavailable cluster deletes, then forces, what the work agent holds", func(t *testing.T) {
		g := NewWithT(t)
		be := spec
		be.RemoveStrategy = v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyBestEffort}
		be.MonitoredResources = nil
		p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "be", UID: "be"}, Spec: be})
		g.Expect(errs).To(BeEmpty())
		s := snapshot(nil, map[string]any{v1alpha1.ClusterDeletingLabel: "true"}, "c1")
		held := object(addons, "a2", "", false)
		held.Meta.Finalizers = []string{v1alpha1.WorkAgentFinalizer}
		gone := object(addons, "a3", "", true)
		gone.Meta.Finalizers = []string{v1alpha1.WorkAgentFinalizer}
		s.Objects = map[schema.GroupVersionResource][]decision.Object{addons: {object(addons, "a1", "", false), held, gone}}
		plan := decision.PlanTeardown(governed(p, s), s)
		g.Expect(plan.Next().Name).To(Equal("addons"))
		var now []string
		for _, a := range plan.Now() {
			now = append(now, string(a.Verb)+" "+a.Name+" "+a.For)
		}
		g.Expect(now).To(Equal([]string{"delete a1 ", "delete a2 ", "force a2 the cluster is unavailable; once deleted",
			"force a3 the cluster is unavailable"}))
		// The same under Required: nothing is forced.
		p.Spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyRequired
		plan = decision.PlanTeardown(governed(p, s), s)
		for _, a := range plan.Now() {
			g.Expect(a.Verb).To(Equal(decision.VerbDelete))
		}
	})

	t.Run("a kept namespace is labelled only while something is left to delete, and unlabelled after", func(t *testing.T) {
		g := NewWithT(t)
		s := snapshot(nil, map[string]any{"keep": "true"}, "c1")
		verbs := func(plan *decision.Plan) []string {
			var out []string
			for _, st := range plan.Steps {
				for _, a := range st.Actions {
					out = append(out, fmt.Sprintf("%s %s %s", st.State, a.Verb, a.Resource))
				}
			}
			return out
		}
		// Objects to delete: the signal step labels it, the namespace step
		// will take the label off.
		plan := decision.PlanTeardown(governed(p, s), s)
		g.Expect(verbs(plan)).To(ContainElements("next label namespaces", "later unlabel namespaces"))
		// Nothing left: neither written.
		s.Objects = nil
		plan = decision.PlanTeardown(governed(p, s), s)
		g.Expect(verbs(plan)).To(Equal([]string{"done keep namespaces", "next removeFinalizer managedclusters.cluster.open-cluster-management.io"}))
	})

	t.Run("a failing expression names its field and holds its step", func(t *testing.T) {
		g := NewWithT(t)
		bad := spec
		bad.KeepNamespace = "namespace.metadata.labels['keep'] == 'true'" // no such key: a run-time error
		p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad", UID: "bad"}, Spec: bad})
		g.Expect(errs).To(BeEmpty())
		s := snapshot(nil, nil, "c1")
		plan := decision.PlanTeardown(governed(p, s), s)
		last := plan.Steps[len(plan.Steps)-1]
		g.Expect(last.Kind).To(Equal(decision.StepNamespace))
		g.Expect(last.Actions).To(ConsistOf(MatchFields(IgnoreExtras, Fields{"Verb": Equal(decision.VerbHold), "For": ContainSubstring("keepNamespace")})))
		g.Expect(last.Undecided).To(BeTrue())
		// A dry run reports the failure as a teardown would, not as a plan.
		p.Spec.DryRun = true
		plan = decision.PlanTeardown(governed(p, s), s)
		g.Expect(plan.Now()).To(BeEmpty())
		g.Expect(plan.DryRunReport().Reason).To(Equal(v1alpha1.CleanupFailedReason))
		g.Expect(plan.DryRunReport().Message).To(ContainSubstring("held, nothing more is deleted"))
	})

	t.Run("a namespace not named after the cluster is never deleted", func(t *testing.T) {
		for _, name := range []string{"kube-system", ""} {
			g := NewWithT(t)
			s := snapshot(nil, nil, name)
			s.Objects = nil
			plan := decision.PlanTeardown(governed(p, s), s)
			for _, st := range plan.Steps {
				for _, a := range st.Actions {
					g.Expect(a.Verb == decision.VerbDelete && a.Resource == decision.NamespacesResource).To(BeFalse(), "%+v", a)
				}
			}
			last := plan.Steps[len(plan.Steps)-1]
			g.Expect(last.Kind).To(Equal(decision.StepNamespace))
			g.Expect(last.Actions[0].For).To(ContainSubstring(`is not the namespace of cluster "c1"`))
		}
	})
}
