package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The labels the generated objects carry and the generated expressions read.
const (
	policyLabel = "plan.fleetops.dev/policy" // on a ManagedCluster: the policy that selects it
	tierLabel   = "tier"                     // on a ManagedCluster: sandbox picks the rule's strategy
	keepLabel   = "keep"                     // on a cluster namespace: true keeps it
	appLabel    = "app"                      // on a ConfigMap: monitored
	stageLabel  = "stage"                    // on a ConfigMap: deleted in a stage of ConfigMaps
	waveLabel   = "wave"                     // on a ManifestWork: early is deleted in the stage "early"
	legacyLabel = "legacy"                   // on a ManifestWork: true orphans everything in it
	keepSuffix  = "-keep"                    // ends the name of a manifest a rule orphans
)

var strategies = []v1alpha1.RemoveStrategyType{
	v1alpha1.RemoveStrategyRequired, v1alpha1.RemoveStrategyBestEffort, v1alpha1.RemoveStrategyNeedless,
}

// priorities are the cleanup-priority values works, add-ons and staged
// ConfigMaps get: none (most often), valid ones, and invalid ones, which
// OCM orders after the unset ones and before the valid ones.
var priorities = []string{"", "", "", "0", "10", "10", "50", "100", "x", "200"}

// fleet is what one seed generates: policies and the clusters they govern.
type fleet struct {
	seed     uint64
	policies []*v1alpha1.CleanupPolicy
	clusters []*cluster
}

// cluster is one generated ManagedCluster and its namespace's content.
type cluster struct {
	name   string
	policy *v1alpha1.CleanupPolicy
	labels map[string]string
	// strategy is the one its policy gives it, known to the generator
	// only to choose its availability.
	strategy v1alpha1.RemoveStrategyType
	// available is false for a cluster whose agent goes away before the
	// teardown (BestEffort only: it forces at once).
	available bool
	keep      bool // its namespace carries keep=true
	objects   []client.Object
}

func (c *cluster) String() string {
	if c.policy == nil {
		return fmt.Sprintf("%s (no policy, %d objects)", c.name, len(c.objects))
	}
	dry := ""
	if c.dryRun() {
		dry = ", dry run"
	}
	return fmt.Sprintf("%s (policy %s, %s%s, available %t, %d objects)", c.name, c.policy.Name, c.strategy, dry, c.available, len(c.objects))
}

// dryRun says whether the cluster's policy is in dry run: its teardown
// ends with the plan reported, and the cluster stays.
func (c *cluster) dryRun() bool { return c.policy != nil && c.policy.Spec.DryRun }

// generate draws a fleet of n clusters from the seed. Names begin with
// prefix, so that fleets of several seeds share one API server. At least
// one cluster is BestEffort and unavailable.
func generate(seed uint64, prefix string, n int) *fleet {
	rng := rand.New(rand.NewPCG(seed, 0x9a7e))
	f := &fleet{seed: seed}
	for i := range min(n, 2+rng.IntN(2)) {
		f.policies = append(f.policies, genPolicy(rng, fmt.Sprintf("%s-p%d", prefix, i)))
	}
	for i := range n {
		c := &cluster{name: fmt.Sprintf("%s-c%d", prefix, i), available: true}
		c.policy = f.policies[rng.IntN(len(f.policies))]
		c.labels = map[string]string{policyLabel: c.policy.Name}
		if i > 0 && rng.IntN(8) == 0 {
			// A cluster no policy selects: the operator has no mandate
			// and writes nothing when it goes.
			c.policy, c.labels[policyLabel] = nil, prefix+"-none"
		}
		if rng.IntN(3) == 0 {
			c.labels[tierLabel] = "sandbox"
		}
		f.clusters = append(f.clusters, c)
	}
	f.strategies()
	var bestEffort []*cluster
	for _, c := range f.clusters {
		if c.strategy == v1alpha1.RemoveStrategyBestEffort && !c.dryRun() {
			bestEffort = append(bestEffort, c)
		}
	}
	if len(bestEffort) == 0 {
		// The first cluster's policy (it has one) turns BestEffort, for
		// it at least, and not in dry run.
		c := f.clusters[0]
		c.policy.Spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyBestEffort
		c.policy.Spec.DryRun = false
		delete(c.labels, tierLabel)
		f.strategies()
		bestEffort = []*cluster{c}
	}
	for i, c := range bestEffort {
		c.available = i > 0 && rng.IntN(2) == 0
	}
	for _, c := range f.clusters {
		genContent(rng, c)
	}
	return f
}

// strategies works out each cluster's strategy from its policy, as the
// generated rules read the tier label.
func (f *fleet) strategies() {
	for _, c := range f.clusters {
		if c.policy == nil {
			continue
		}
		c.strategy = c.policy.Spec.RemoveStrategy.Default
		for _, r := range c.policy.Spec.RemoveStrategy.Rules {
			if c.labels[tierLabel] == "sandbox" {
				c.strategy = r.Strategy
				break
			}
		}
	}
}

func pick[T any](rng *rand.Rand, from []T) T { return from[rng.IntN(len(from))] }

func genPolicy(rng *rand.Rand, name string) *v1alpha1.CleanupPolicy {
	p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s := &p.Spec
	s.ClusterSelector = fmt.Sprintf("cluster.metadata.labels[?'%s'].orValue('') == '%s'", policyLabel, name)
	// No run reaches the timeout: BestEffort forces because its cluster
	// is unavailable, never because time passed.
	s.RemoveStrategy = v1alpha1.RemoveStrategy{Default: pick(rng, strategies), Timeout: &metav1.Duration{Duration: time.Hour}}
	if rng.IntN(2) == 0 {
		s.RemoveStrategy.Rules = []v1alpha1.StrategyRule{{
			When: fmt.Sprintf("cluster.metadata.labels[?'%s'].orValue('') == 'sandbox'", tierLabel), Strategy: pick(rng, strategies),
		}}
	}
	if rng.IntN(3) > 0 {
		s.MonitoredResources = []v1alpha1.MonitoredResource{{
			GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			When:                 fmt.Sprintf("object.metadata.labels[?'%s'].hasValue()", appLabel),
		}}
	}
	if rng.IntN(2) == 0 {
		s.DeletionStages = genStages(rng)
	}
	// In dry run the operator reports the plan and writes nothing.
	s.DryRun = rng.IntN(6) == 0
	if rng.IntN(2) == 0 {
		s.KeepNamespace = fmt.Sprintf("namespace.metadata.labels[?'%s'].orValue('') == 'true'", keepLabel)
	}
	if rng.IntN(4) > 0 {
		s.DeletionSignal = &v1alpha1.DeletionSignal{WorkName: pick(rng, []string{"", "alive"}), Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"}}`)}}}}
	}
	rules := []v1alpha1.OrphaningRule{
		{Name: "keep-suffix", When: fmt.Sprintf("manifest.metadata.name.endsWith('%s')", keepSuffix)},
		{Name: "legacy", When: fmt.Sprintf("work.metadata.labels[?'%s'].orValue('') == 'true'", legacyLabel)},
		{Name: "crds", When: "manifest.kind == 'CustomResourceDefinition'"},
	}
	for _, r := range rules {
		if rng.IntN(2) == 0 {
			s.Orphaning = append(s.Orphaning, r)
		}
	}
	return p
}

// genStages draws custom deletion stages: add-ons, the works of the early
// wave, the other works, and maybe staged ConfigMaps, in some order, the
// early wave before the other works.
func genStages(rng *rand.Rand) []v1alpha1.DeletionStage {
	gvr := func(group, version, resource string) v1alpha1.GroupVersionResource {
		return v1alpha1.GroupVersionResource{Group: group, Version: version, Resource: resource}
	}
	addonStage := v1alpha1.DeletionStage{Name: "addons", GroupVersionResource: gvr("addon.open-cluster-management.io", "v1alpha1", "managedclusteraddons")}
	early := v1alpha1.DeletionStage{Name: "early", GroupVersionResource: gvr("work.open-cluster-management.io", "v1", "manifestworks"),
		When: fmt.Sprintf("object.metadata.labels[?'%s'].orValue('') == 'early'", waveLabel)}
	rest := v1alpha1.DeletionStage{Name: "works", GroupVersionResource: gvr("work.open-cluster-management.io", "v1", "manifestworks")}
	cms := v1alpha1.DeletionStage{Name: "configmaps", GroupVersionResource: gvr("", "v1", "configmaps"),
		When: fmt.Sprintf("object.metadata.labels[?'%s'].hasValue()", stageLabel)}
	out := []v1alpha1.DeletionStage{early, rest}
	out = slices.Insert(out, rng.IntN(len(out)+1), addonStage)
	if rng.IntN(2) == 0 {
		out = slices.Insert(out, rng.IntN(len(out)+1), cms)
	}
	return out
}

// genContent draws what the cluster namespace holds: add-ons, which go
// once deleted (no finalizer), works, which the work agent holds with its
// finalizer until it lets them go, monitored ConfigMaps, which hold the
// gate until the test deletes them as their controllers would, staged
// ConfigMaps, and ConfigMaps no policy names. A monitored ConfigMap is
// never in a stage: the test deletes it, so a plan that listed it in a
// stage would be wrong by the test's doing.
func genContent(rng *rand.Rand, c *cluster) {
	c.keep = rng.IntN(2) == 0
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.name, Labels: map[string]string{decision.OCMClusterNameLabel: c.name}}}
	if c.keep {
		ns.Labels[keepLabel] = "true"
	}
	c.objects = append(c.objects, ns)
	withPriority := func(o metav1.Object) {
		if p := pick(rng, priorities); p != "" {
			o.SetAnnotations(map[string]string{clusterv1.CleanupPriorityAnnotationKey: p})
		}
	}
	for i := range rng.IntN(3) {
		a := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		a.SetAPIVersion("addon.open-cluster-management.io/v1alpha1")
		a.SetKind("ManagedClusterAddOn")
		a.SetNamespace(c.name)
		a.SetName(fmt.Sprintf("addon-%d", i))
		withPriority(a)
		c.objects = append(c.objects, a)
	}
	for i := range 1 + rng.IntN(4) {
		w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: c.name, Name: fmt.Sprintf("work-%d", i), Labels: map[string]string{}}}
		withPriority(w)
		if rng.IntN(3) == 0 {
			w.Labels[waveLabel] = "early"
		}
		if rng.IntN(5) == 0 {
			w.Labels[legacyLabel] = "true"
		}
		for j := range 1 + rng.IntN(3) {
			name := fmt.Sprintf("%s-m%d", w.Name, j)
			if rng.IntN(3) == 0 {
				name += keepSuffix
			}
			raw := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"}}`, name)
			if rng.IntN(6) == 0 {
				raw = fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"%ss.example.com"}}`, strings.ReplaceAll(name, "-", ""))
			}
			w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: []byte(raw)}})
		}
		c.objects = append(c.objects, w)
	}
	for i := range rng.IntN(3) {
		c.objects = append(c.objects, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: c.name, Name: fmt.Sprintf("monitored-%d", i), Labels: map[string]string{appLabel: "shop"}}})
	}
	for i := range rng.IntN(3) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.name, Name: fmt.Sprintf("staged-%d", i), Labels: map[string]string{stageLabel: "x"}}}
		withPriority(cm)
		c.objects = append(c.objects, cm)
	}
	c.objects = append(c.objects, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.name, Name: "unrelated"}})
}

// monitored says whether an object is one the test removes, as its
// controller would, once the teardown waits for it.
func monitored(o client.Object) bool {
	_, ok := o.(*corev1.ConfigMap)
	return ok && o.GetLabels()[appLabel] != ""
}

// describe lists the fleet for a failure message.
func (f *fleet) describe() string {
	var b strings.Builder
	for _, p := range f.policies {
		s := p.Spec
		fmt.Fprintf(&b, "\n  policy %s: default %s, %d strategy rule(s), %d monitored, %d stage(s), keepNamespace %t, signal %t, %d orphaning rule(s), dry run %t",
			p.Name, s.RemoveStrategy.Default, len(s.RemoveStrategy.Rules), len(s.MonitoredResources), len(s.DeletionStages),
			s.KeepNamespace != "", s.DeletionSignal != nil, len(s.Orphaning), s.DryRun)
	}
	for _, c := range f.clusters {
		fmt.Fprintf(&b, "\n  cluster %s", c)
	}
	return b.String()
}

// create creates the policies, then each cluster: the ManagedCluster
// (Available), its namespace and the namespace's content.
func (f *fleet) create(ctx context.Context, c client.Client) error {
	for _, p := range f.policies {
		if err := c.Create(ctx, p.DeepCopy()); err != nil {
			return fmt.Errorf("creating policy %s: %w", p.Name, err)
		}
	}
	for _, cl := range f.clusters {
		mc := newManagedCluster(cl.name)
		mc.SetLabels(cl.labels)
		if err := unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient"); err != nil {
			return err
		}
		if err := c.Create(ctx, mc); err != nil {
			return fmt.Errorf("creating ManagedCluster %s: %w", cl.name, err)
		}
		if err := testenv.SetAvailable(ctx, c, cl.name, metav1.ConditionTrue); err != nil {
			return err
		}
		for _, o := range cl.objects {
			o = o.DeepCopyObject().(client.Object)
			if err := c.Create(ctx, o); err != nil {
				return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	return nil
}

func newManagedCluster(name string) *unstructured.Unstructured {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
	mc.SetKind("ManagedCluster")
	mc.SetName(name)
	return mc
}
