package crash

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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

const (
	// strategyLabel selects, on a ManagedCluster, the policy that governs it.
	strategyLabel = "crash.fleetops.dev/strategy"
	// addonFinalizer is held on add-ons by the simulated add-on manager
	// until it has cleaned up after them.
	addonFinalizer = "crash.fleetops.dev/addon-cleanup"
	// clusterFinalizer is held on some clusters, as OCM's registration
	// holds its own, until the operator's finalizer is gone: those
	// clusters stay for the outcome condition to be read.
	clusterFinalizer = "crash.fleetops.dev/registration-cleanup"
	signalWork       = "alive"
	// keepSuffix ends the name of the manifest of each work that the
	// policies' orphaning rule keeps on the managed cluster.
	keepSuffix = "-keep"
	monitored  = "app"
	unrelated  = "unrelated"
)

var strategies = []v1alpha1.RemoveStrategyType{
	v1alpha1.RemoveStrategyRequired, v1alpha1.RemoveStrategyBestEffort, v1alpha1.RemoveStrategyNeedless,
}

// createPolicies creates one policy per strategy, each governing the
// clusters labelled with it: the signal work, a gate on ConfigMaps labelled
// app, the default stages, and a timeout no run reaches.
func createPolicies(ctx context.Context, c client.Client) error {
	for _, s := range strategies {
		p := &v1alpha1.CleanupPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "crash-" + strings.ToLower(string(s))},
			Spec: v1alpha1.CleanupPolicySpec{
				ClusterSelector: fmt.Sprintf("cluster.metadata.labels[?'%s'].orValue('') == '%s'", strategyLabel, s),
				RemoveStrategy:  v1alpha1.RemoveStrategy{Default: s, Timeout: &metav1.Duration{Duration: time.Hour}},
				MonitoredResources: []v1alpha1.MonitoredResource{{
					GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
					When:                 "object.metadata.labels[?'app'].hasValue()",
				}},
				DeletionSignal: &v1alpha1.DeletionSignal{WorkName: signalWork, Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
					Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"}}`)}}}},
				// Every work keeps one of its two manifests on the managed
				// cluster: SelectivelyOrphan, which Needless must widen to
				// Orphan.
				Orphaning: []v1alpha1.OrphaningRule{{Name: "keep", When: "manifest.metadata.name.endsWith('" + keepSuffix + "')"}},
			},
		}
		if err := c.Create(ctx, p); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	return nil
}

// priorities are the cleanup-priority groups of a cluster's works, in the
// order OCM deletes them: without the annotation first, then by value.
var priorities = []string{"", "10", "50"}

// teardown is a cluster the test deletes and what its namespace holds.
type teardown struct {
	cluster  string
	strategy v1alpha1.RemoveStrategyType
	addons   []string
	works    map[string]string // name: cleanup-priority
	// outcome is the outcome its record ended with, read once the
	// teardowns end: a cluster that went with the operator's finalizer,
	// its only one, carries no outcome condition.
	outcome string
	// kept: the cluster carries clusterFinalizer, so it outlives the
	// operator's finalizer and must carry the outcome condition.
	kept bool
}

// createCluster creates a governed cluster, its namespace and its content:
// add-ons, works in three cleanup-priority groups, a monitored ConfigMap
// and one the policy does not monitor.
func createCluster(ctx context.Context, c client.Client, name string, s v1alpha1.RemoveStrategyType, addons, worksPerGroup int) (*teardown, error) {
	// About half the clusters, by a hash of their name, are kept by
	// another finalizer.
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	td := &teardown{cluster: name, strategy: s, works: map[string]string{}, kept: h.Sum32()%2 == 0}
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
	mc.SetKind("ManagedCluster")
	mc.SetName(name)
	mc.SetLabels(map[string]string{strategyLabel: string(s)})
	if td.kept {
		mc.SetFinalizers([]string{clusterFinalizer})
	}
	if err := unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient"); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, mc); err != nil {
		return nil, err
	}
	if err := testenv.SetAvailable(ctx, c, name, metav1.ConditionTrue); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{decision.OCMClusterNameLabel: name}}}); err != nil {
		return nil, err
	}
	for i := range addons {
		a := &unstructured.Unstructured{}
		a.SetAPIVersion("addon.open-cluster-management.io/v1alpha1")
		a.SetKind("ManagedClusterAddOn")
		a.SetNamespace(name)
		a.SetName(fmt.Sprintf("addon-%d", i))
		a.SetFinalizers([]string{addonFinalizer})
		if err := unstructured.SetNestedField(a.Object, map[string]any{}, "spec"); err != nil {
			return nil, err
		}
		if err := c.Create(ctx, a); err != nil {
			return nil, err
		}
		td.addons = append(td.addons, a.GetName())
	}
	for _, prio := range priorities {
		for i := range worksPerGroup {
			w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{
				Namespace: name, Name: fmt.Sprintf("work-p%s-%d", cmpOr(prio, "unset"), i),
				Finalizers: []string{v1alpha1.WorkAgentFinalizer},
			}}
			if prio != "" {
				w.Annotations = map[string]string{clusterv1.CleanupPriorityAnnotationKey: prio}
			}
			for _, name := range []string{w.Name, w.Name + keepSuffix} {
				w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{
					Raw: fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"}}`, name)}})
			}
			if err := c.Create(ctx, w); err != nil {
				return nil, err
			}
			td.works[w.Name] = prio
		}
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: monitored, Labels: map[string]string{"app": "shop"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: unrelated}},
	} {
		if err := c.Create(ctx, cm); err != nil {
			return nil, err
		}
	}
	return td, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// governed says whether the operator took the cluster in: its finalizer,
// and the signal work applied by the agent.
func governed(ctx context.Context, c client.Client, name string) (bool, error) {
	mc := &metav1.PartialObjectMetadata{}
	mc.SetGroupVersionKind(clusterv1.SchemeGroupVersion.WithKind("ManagedCluster"))
	if err := c.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		return false, err
	}
	if !slices.Contains(mc.Finalizers, v1alpha1.ClusterCleanupFinalizer) {
		return false, nil
	}
	w := &workv1.ManifestWork{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: name, Name: signalWork}, w); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return appliedAt(w) >= w.Generation && slices.Contains(w.Finalizers, v1alpha1.WorkAgentFinalizer), nil
}

// settled says whether every work of the cluster other than the signal
// work carries the deleteOption its orphaning rule decides and the agent
// applied it.
func settled(ctx context.Context, c client.Client, name string) (bool, error) {
	var works workv1.ManifestWorkList
	if err := c.List(ctx, &works, client.InNamespace(name)); err != nil {
		return false, err
	}
	for _, w := range works.Items {
		if w.Name == signalWork {
			continue
		}
		if w.Spec.DeleteOption == nil || w.Spec.DeleteOption.PropagationPolicy != workv1.DeletePropagationPolicyTypeSelectivelyOrphan || appliedAt(&w) < w.Generation {
			return false, nil
		}
	}
	return true, nil
}

// contentDeleteReason is the reason of the cluster's ContentDeleteSuccess
// condition, "" without one, "gone" without the cluster.
func contentDeleteReason(ctx context.Context, c client.Client, name string) (string, string, error) {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
	mc.SetKind("ManagedCluster")
	if err := c.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return "gone", "", nil
		}
		return "", "", err
	}
	reason, message := conditionOf(mc, v1alpha1.ContentDeleteSuccessCondition)
	return reason, message, nil
}

func conditionOf(mc *unstructured.Unstructured, typ string) (reason, message string) {
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, r := range raw {
		m, _ := r.(map[string]any)
		if m["type"] == typ {
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return reason + "/" + fmt.Sprint(m["status"]), message
		}
	}
	return "", ""
}

func appliedAt(w *workv1.ManifestWork) int64 {
	if c := apimeta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil && c.Status == metav1.ConditionTrue {
		return c.ObservedGeneration
	}
	return -1
}

// agent plays, on the hub, OCM's work agent of every cluster and the add-on
// manager: it puts its finalizer on works and reports each generation
// Applied after a delay, removes its finalizer from a deleting work after a
// delay (as once it removed the work's resources from the managed cluster),
// and the add-on manager removes its finalizer from a deleting add-on.
// The agents of offline clusters do nothing.
type agent struct {
	c       client.Client
	mu      sync.Mutex
	rng     *rand.Rand
	offline map[string]bool
	// due is when each pending action is done, by object UID and action.
	due map[string]time.Time
}

func newAgent(c client.Client, seed uint64) *agent {
	return &agent{c: c, rng: rand.New(rand.NewPCG(seed, 0x5eed)), offline: map[string]bool{}, due: map[string]time.Time{}}
}

func (a *agent) setOffline(namespace string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.offline[namespace] = true
}

// ready says whether the action key is due, scheduling it after a random
// delay in [min, max) the first time it is asked for.
func (a *agent) ready(key string, lo, hi time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.due[key]
	if !ok {
		at = time.Now().Add(lo + time.Duration(a.rng.Int64N(int64(hi-lo))))
		a.due[key] = at
	}
	return !time.Now().Before(at)
}

func (a *agent) run(ctx context.Context) {
	for ctx.Err() == nil {
		var works workv1.ManifestWorkList
		if err := a.c.List(ctx, &works); err == nil {
			for i := range works.Items {
				a.handleWork(ctx, &works.Items[i])
			}
		}
		addons := &metav1.PartialObjectMetadataList{}
		addons.SetGroupVersionKind(addonsGVR.GroupVersion().WithKind("ManagedClusterAddOnList"))
		if err := a.c.List(ctx, addons); err == nil {
			for i := range addons.Items {
				a.handleAddon(ctx, &addons.Items[i])
			}
		}
		clusters := &metav1.PartialObjectMetadataList{}
		clusters.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ManagedClusterList"))
		if err := a.c.List(ctx, clusters); err == nil {
			for i := range clusters.Items {
				a.handleCluster(ctx, &clusters.Items[i])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *agent) handleWork(ctx context.Context, w *workv1.ManifestWork) {
	a.mu.Lock()
	off := a.offline[w.Namespace]
	a.mu.Unlock()
	if off {
		return
	}
	uid := string(w.UID)
	switch {
	case w.DeletionTimestamp != nil:
		if i := slices.Index(w.Finalizers, v1alpha1.WorkAgentFinalizer); i >= 0 && a.ready(uid+"/remove", 100*time.Millisecond, 600*time.Millisecond) {
			w.Finalizers = slices.Delete(w.Finalizers, i, i+1)
			_ = a.c.Update(ctx, w)
		}
	case !slices.Contains(w.Finalizers, v1alpha1.WorkAgentFinalizer):
		w.Finalizers = append(w.Finalizers, v1alpha1.WorkAgentFinalizer)
		_ = a.c.Update(ctx, w)
	case appliedAt(w) < w.Generation:
		if !a.ready(fmt.Sprintf("%s/apply/%d", uid, w.Generation), 50*time.Millisecond, 400*time.Millisecond) {
			return
		}
		apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
			Message: "applied by the simulated agent", ObservedGeneration: w.Generation,
		})
		_ = a.c.Status().Update(ctx, w)
	}
}

func (a *agent) handleAddon(ctx context.Context, o *metav1.PartialObjectMetadata) {
	if o.DeletionTimestamp != nil && a.ready(string(o.UID)+"/remove", 100*time.Millisecond, 600*time.Millisecond) {
		a.removeFinalizer(ctx, o, addonFinalizer)
	}
}

// handleCluster removes clusterFinalizer from a deleting cluster once the
// operator's finalizer is gone.
func (a *agent) handleCluster(ctx context.Context, o *metav1.PartialObjectMetadata) {
	if o.DeletionTimestamp != nil && !slices.Contains(o.Finalizers, v1alpha1.ClusterCleanupFinalizer) {
		a.removeFinalizer(ctx, o, clusterFinalizer)
	}
}

func (a *agent) removeFinalizer(ctx context.Context, o *metav1.PartialObjectMetadata, finalizer string) {
	i := slices.Index(o.Finalizers, finalizer)
	if i < 0 {
		return
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`, i, finalizer, i)
	_ = a.c.Patch(ctx, o, client.RawPatch("application/json-patch+json", []byte(patch)))
}
