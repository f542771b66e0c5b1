package decision_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// The fuzzer's generated fleets: a policy, a cluster, what its namespace
// holds, and what an executor remembers, as the reader gives them to the
// plan.

// fleet is one generated input: a policy, a cluster and what its namespace
// holds.
type fleet struct {
	spec      v1alpha1.CleanupPolicySpec
	cluster   string
	labels    map[string]any
	available bool
	namespace map[string]any // nil: no namespace
	objects   map[schema.GroupVersionResource][]decision.Object
	// manifests are the manifests of each work, by work name.
	manifests map[string][]map[string]any
	// configurationPolicies are ConfigurationPolicies of the namespace.
	configurationPolicies []map[string]any
	// now is the time of the decision, since the cluster was deleted.
	now time.Duration
	// memory is what an executor remembers of its writes.
	memory decision.Memory
	// applied are the works whose agent applied their generation.
	applied map[string]bool
}

var (
	configMaps         = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	clusterDeployments = schema.GroupVersionResource{Group: "hive.openshift.io", Version: "v1", Resource: "clusterdeployments"}
	resourcePool       = []schema.GroupVersionResource{decision.ManifestWorks, decision.ManagedClusterAddOns, configMaps, clusterDeployments}
)

// Expressions of each field, well formed; some fail at run time on some
// objects (a missing key), and some name a variable the field does not bind.
var (
	clusterExprs = []string{
		"cluster.metadata.labels[?'tier'].orValue('') == 'sandbox'",
		"cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		"cluster.metadata.name.startsWith('c')",
		"cluster.metadata.labels['tier'] == 'sandbox'",
		"size(cluster.metadata.labels) > 1",
		"true", "false",
	}
	objectExprs = []string{
		"object.metadata.name.startsWith('hold')",
		"object.metadata.labels[?'app'].hasValue()",
		"!object.metadata.name.endsWith('-klusterlet')",
		"object.metadata.annotations[?'open-cluster-management.io/cleanup-priority'].orValue('') == '1'",
		"object.metadata.labels['app'] == 'web'",
		"has(object.metadata.deletionTimestamp)",
		"object.metadata.name == cluster.metadata.name",
		"true", "false",
	}
	namespaceExprs = []string{
		"namespace.metadata.labels[?'keep'].orValue('') == 'true'",
		"namespace.metadata.labels['keep'] == 'true'",
		"namespace.metadata.name == cluster.metadata.name",
		"true", "false",
	}
	manifestExprs = []string{
		"manifest.kind == 'CustomResourceDefinition'",
		"work.metadata.labels[?'legacy'].orValue('') == 'true'",
		"manifest.metadata.name.startsWith('keep')",
		"manifest.spec.replicas == 1",
		"manifest.kind == 'Namespace' || manifest.kind == 'CustomResourceDefinition'",
		"true", "false",
	}
	policyExprs = []string{
		"policy.metadata.labels[?'cleanup'].orValue('') == 'strict'",
		"policy.spec.remediationAction.lowerAscii() == 'enforce'",
		"true",
	}
	names      = []string{"a", "b", "hold-1", "hold-2", "web", "x-klusterlet", "cleanup-signal", "signal", "keep-me", "app"}
	priorities = []string{"", "", "0", "1", "1", "50", "100", "101", "-1", "high"}
	kinds      = []string{"ConfigMap", "Deployment", "CustomResourceDefinition", "Namespace", "Unknown", ""}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// expression returns an expression of the pool, or sometimes the fuzzer's.
func expression(r *rand.Rand, pool []string, expr string) string {
	if expr != "" && r.IntN(6) == 0 {
		return expr
	}
	return pick(r, pool)
}

func newFleet(r *rand.Rand, expr string) *fleet {
	in := &fleet{
		cluster:   pick(r, []string{"c1", "cluster-a", "prod-eu-1"}),
		labels:    map[string]any{},
		available: r.IntN(2) == 0,
		objects:   map[schema.GroupVersionResource][]decision.Object{},
		manifests: map[string][]map[string]any{},
	}
	for range r.IntN(4) {
		in.labels[pick(r, []string{"tier", "env", "legacy", "keep"})] = pick(r, []string{"sandbox", "prod", "true", ""})
	}

	s := &in.spec
	if r.IntN(4) == 0 {
		s.ClusterSelector = expression(r, clusterExprs, expr)
	}
	for i := range r.IntN(3) {
		s.Variables = append(s.Variables, v1alpha1.Variable{Name: fmt.Sprintf("v%d", i), Expression: expression(r, []string{
			"cluster.metadata.labels[?'tier'].orValue('standard')", "cluster.metadata.name", "size(cluster.metadata.labels)"}, expr)})
	}
	s.RemoveStrategy.Default = pick(r, v1alpha1.RemoveStrategyTypes)
	for range r.IntN(3) {
		when := expression(r, clusterExprs, expr)
		if len(s.Variables) > 0 && r.IntN(4) == 0 {
			when = "variables.v0 == 'sandbox'"
		}
		s.RemoveStrategy.Rules = append(s.RemoveStrategy.Rules, v1alpha1.StrategyRule{When: when, Strategy: pick(r, v1alpha1.RemoveStrategyTypes)})
	}
	if r.IntN(3) == 0 {
		s.RemoveStrategy.Timeout = &metav1.Duration{Duration: time.Duration(1+r.IntN(120)) * time.Minute}
	}
	for range r.IntN(3) {
		m := v1alpha1.MonitoredResource{GroupVersionResource: apiGVR(pick(r, resourcePool))}
		if r.IntN(2) == 0 {
			m.When = expression(r, objectExprs, expr)
		}
		s.MonitoredResources = append(s.MonitoredResources, m)
	}
	for i := range r.IntN(4) {
		st := v1alpha1.DeletionStage{Name: fmt.Sprintf("s%d", i), GroupVersionResource: apiGVR(pick(r, resourcePool))}
		if r.IntN(2) == 0 {
			st.When = expression(r, objectExprs, expr)
		}
		s.DeletionStages = append(s.DeletionStages, st)
	}
	if r.IntN(2) == 0 {
		s.KeepNamespace = expression(r, namespaceExprs, expr)
	}
	if r.IntN(2) == 0 {
		s.DeletionSignal = &v1alpha1.DeletionSignal{WorkName: pick(r, []string{"", "cleanup-signal", "signal", "web"})}
	}
	for i := range r.IntN(3) {
		s.Orphaning = append(s.Orphaning, v1alpha1.OrphaningRule{Name: fmt.Sprintf("r%d", i), When: expression(r, manifestExprs, expr)})
	}
	if r.IntN(3) == 0 {
		s.Prune = &v1alpha1.Prune{Default: pick(r, append([]v1alpha1.PruneBehavior{""}, v1alpha1.PruneBehaviors...))}
		for range r.IntN(3) {
			s.Prune.Rules = append(s.Prune.Rules, v1alpha1.PruneRule{When: expression(r, policyExprs, expr), Behavior: pick(r, v1alpha1.PruneBehaviors)})
		}
	}
	s.DryRun = r.IntN(5) == 0

	// The namespace: mostly the cluster's, sometimes none, sometimes one
	// named otherwise (which must never be planned for deletion).
	switch r.IntN(8) {
	case 0:
	case 1:
		in.namespace = map[string]any{"metadata": map[string]any{"name": pick(r, []string{"other", "", "kube-system", in.cluster + "x"})}}
	case 2:
		in.namespace = map[string]any{"metadata": map[string]any{}}
	default:
		labels := map[string]any{}
		if r.IntN(2) == 0 {
			labels["keep"] = pick(r, []string{"true", "false"})
		}
		in.namespace = map[string]any{"metadata": map[string]any{"name": in.cluster, "labels": labels}}
	}

	for _, gvr := range resourcePool {
		seen := map[string]bool{}
		for range r.IntN(6) {
			name := pick(r, names)
			if seen[name] {
				continue
			}
			seen[name] = true
			in.objects[gvr] = append(in.objects[gvr], newObject(r, gvr, in.cluster, name))
		}
	}
	for _, w := range in.objects[decision.ManifestWorks] {
		var ms []map[string]any
		for range r.IntN(4) {
			m := map[string]any{"apiVersion": pick(r, []string{"v1", "apps/v1", "apiextensions.k8s.io/v1", "a/b/c", ""}), "kind": pick(r, kinds)}
			md := map[string]any{"name": pick(r, names)}
			if r.IntN(2) == 0 {
				md["namespace"] = pick(r, []string{"default", "kube-system"})
			}
			m["metadata"] = md
			if r.IntN(3) == 0 {
				m["spec"] = map[string]any{"replicas": int64(r.IntN(3))}
			}
			ms = append(ms, m)
		}
		in.manifests[w.Meta.Name] = ms
	}
	for range r.IntN(3) {
		cp := map[string]any{"metadata": map[string]any{"name": pick(r, names), "namespace": in.cluster,
			"labels": map[string]any{"cleanup": pick(r, []string{"strict", "loose"})}}}
		if r.IntN(4) != 0 {
			cp["spec"] = map[string]any{"remediationAction": pick(r, []string{"enforce", "inform", "Enforce"})}
		}
		in.configurationPolicies = append(in.configurationPolicies, cp)
	}
	in.now = time.Duration(r.IntN(180)) * time.Minute
	in.memory = decision.Memory{Stamped: map[types.UID]int64{}, Restamps: map[types.UID]int{}, Deleted: map[types.UID]bool{}, Forced: map[types.UID]bool{}}
	in.applied = map[string]bool{}
	for _, objs := range in.objects {
		for _, o := range objs {
			switch r.IntN(8) {
			case 0:
				in.memory.Deleted[o.Meta.UID] = true
			case 1:
				in.memory.Forced[o.Meta.UID] = true
			case 2:
				in.memory.Stamped[o.Meta.UID] = int64(1 + r.IntN(3))
				in.memory.Restamps[o.Meta.UID] = r.IntN(6)
			}
			in.applied[o.Meta.Name] = r.IntN(2) == 0
			if r.IntN(2) == 0 {
				o.Meta.Finalizers = []string{v1alpha1.WorkAgentFinalizer}
			}
		}
	}
	return in
}

// snapshot is the fleet as the reader gives it to the plan.
func (in *fleet) snapshot(t *testing.T) *decision.Snapshot {
	deleted := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	status := "False"
	if in.available {
		status = "True"
	}
	cluster := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": in.cluster, "labels": in.labels, "uid": "cluster-uid"},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "ManagedClusterConditionAvailable", "status": status}}}}}
	cluster.SetDeletionTimestamp(&deleted)
	s := &decision.Snapshot{Cluster: cluster, Objects: in.objects, Works: map[types.UID]*workv1.ManifestWork{},
		Now: deleted.Add(in.now), Memory: in.memory, Unserved: map[schema.GroupVersionResource]bool{},
		ResourceOf: func(gvk schema.GroupVersionKind) (string, error) {
			if gvk.Kind == "Unknown" || gvk.Kind == "" {
				return "", errUnknownKind
			}
			return strings.ToLower(gvk.Kind) + "s", nil
		}}
	if in.namespace != nil {
		s.Namespace = &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(in.namespace, s.Namespace); err != nil {
			t.Fatal(err)
		}
		s.Namespace.Labels = ocmLabelled(s.Namespace.Labels, s.Namespace.Name)
	}
	for _, o := range in.objects[decision.ManifestWorks] {
		s.Works[o.Meta.UID] = in.work(t, o)
	}
	return s
}

// work is a work whole: its metadata, its manifests and, maybe, the agent's
// report that it applied them.
func (in *fleet) work(t *testing.T, o decision.Object) *workv1.ManifestWork {
	w := &workv1.ManifestWork{ObjectMeta: o.Meta.ObjectMeta}
	w.Generation = 2
	for _, m := range in.manifests[o.Meta.Name] {
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	if in.applied[o.Meta.Name] {
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, ObservedGeneration: 2}}
	}
	return w
}

func apiGVR(g schema.GroupVersionResource) v1alpha1.GroupVersionResource {
	return v1alpha1.GroupVersionResource{Group: g.Group, Version: g.Version, Resource: g.Resource}
}

// newObject is an object as the operator's metadata-only reads give it.
func newObject(r *rand.Rand, gvr schema.GroupVersionResource, namespace, name string) decision.Object {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(gvr.Resource + "/" + name)}}
	if p := pick(r, priorities); p != "" {
		m.Annotations = map[string]string{"open-cluster-management.io/cleanup-priority": p}
	}
	if r.IntN(3) == 0 {
		m.Labels = map[string]string{pick(r, []string{"app", "legacy"}): pick(r, []string{"web", "true"})}
	}
	if gvr == decision.ManifestWorks && r.IntN(6) == 0 {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[v1alpha1.SignalWorkLabel] = "true"
	}
	if r.IntN(5) == 0 {
		ts := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		m.DeletionTimestamp = &ts
	}
	value, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		panic(err)
	}
	return decision.Object{GVR: gvr, Meta: m, Value: value}
}
