package teardown

import (
	"context"
	"testing"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// reviewSignalFixture: a deleted cluster c1 whose namespace is not labelled
// yet and whose operator-owned signal work is still there: the plan's next
// step is the signal (label the namespace, delete the signal work).
func reviewSignalFixture(t *testing.T, keep bool, governed bool) (*unstructured.Unstructured, *corev1.Namespace, *workv1.ManifestWork, *decision.Governed, *decision.Snapshot) {
	t.Helper()
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	spec := v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		DeletionSignal: &v1alpha1.DeletionSignal{WorkName: "cleanup-signal"}}
	p, errs := cel.Compile(env, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p", Generation: 1}, Spec: spec})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	deleted := metav1.NewTime(time.Now().Add(-time.Minute))
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster"})
	mc.SetName("c1")
	mc.SetUID("c1")
	mc.SetDeletionTimestamp(&deleted)
	mc.SetFinalizers([]string{v1alpha1.ClusterCleanupFinalizer})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "ns", ResourceVersion: "5"}}
	if !governed {
		ns.Labels = map[string]string{v1alpha1.ClusterDeletingLabel: "true"}
	}
	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-signal", Namespace: "c1", UID: "sig", ResourceVersion: "7", Generation: 1,
		Labels: map[string]string{v1alpha1.SignalWorkLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}}}
	meta := metav1.PartialObjectMetadata{ObjectMeta: w.ObjectMeta}
	meta.SetGroupVersionKind(workv1.GroupVersion.WithKind("ManifestWork"))
	value, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
	s := &decision.Snapshot{Cluster: mc, Namespace: ns, Now: time.Now(), SignalOwned: true,
		Objects:  map[schema.GroupVersionResource][]decision.Object{decision.ManifestWorks: {{GVR: decision.ManifestWorks, Meta: &meta, Value: value}}},
		Works:    map[types.UID]*workv1.ManifestWork{w.UID: w},
		Unserved: map[schema.GroupVersionResource]bool{}}
	g := &decision.Governed{Cluster: mc}
	if governed {
		g.Policy = p
		g.Activation = p.Bind(context.Background(), cel.NewBudget(cel.ReconcileCostBudget), mc.Object)
	} else {
		s.Objects, s.Works = map[schema.GroupVersionResource][]decision.Object{}, map[types.UID]*workv1.ManifestWork{}
	}
	return mc, ns, w, g, s
}

// writes records the writes the executor makes, and refuses the
// namespace's patch with a Conflict: the cache's namespace is older than
// the API server's (another controller changed it meanwhile).
type writes struct {
	deletes []string
	patches []string
}

func reviewAdapter(t *testing.T, rec *writes, objs ...client.Object) *ClusterTeardown {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = workv1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				rec.patches = append(rec.patches, "namespace/"+obj.GetName()+" (conflict)")
				return apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, obj.GetName(), nil)
			}
			rec.patches = append(rec.patches, obj.GetName())
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			rec.deletes = append(rec.deletes, obj.GetNamespace()+"/"+obj.GetName())
			return nil
		},
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return nil
		},
	}).Build()
	metrics := metrics.NewMetrics()
	return &ClusterTeardown{ClusterWriter: ClusterWriter{Client: c, Recorder: events.NewFakeRecorder(100), Metrics: metrics}, Teardowns: NewTeardowns(metrics),
		records: &record.Writer{Client: c, Reader: c, Namespace: "cleanup-operator-system"}}
}

// TestReviewSignalNotDeletedWhenLabelRefused: "labels ... before deletes"
// (run's doc). A conflict on the namespace label (setDeletingLabel returns
// nil on Conflict) is taken for success, and the deletion-signal work is
// deleted in the same reconcile, with the namespace unlabelled: the
// signal goes out while admission still accepts new works.
func TestReviewSignalNotDeletedWhenLabelRefused(t *testing.T) {
	mc, ns, w, g, s := reviewSignalFixture(t, false, true)
	plan := decision.PlanTeardown(g, s)
	next := plan.Next()
	if next == nil || next.Kind != decision.StepSignal {
		t.Fatalf("next step: %+v", next)
	}
	rec := &writes{}
	a := reviewAdapter(t, rec, ns, w)
	if _, err := a.execute(context.Background(), a.Teardowns.of(mc.GetName(), mc.GetUID()), newClusterPatch(a.Client, mc), s, plan); err != nil {
		t.Logf("execute: %v", err)
	}
	t.Logf("patches: %v; deletes: %v", rec.patches, rec.deletes)
	if len(rec.deletes) > 0 {
		t.Errorf("the label was refused (Conflict), yet the signal work was deleted: %v", rec.deletes)
	}
}

// TestReviewReleaseKeepsFinalizerWhenUnlabelRefused: the release of a
// deleting cluster no policy governs any more takes the label off the
// namespace, then removes the finalizer. The unlabel carries the cached
// resourceVersion; its Conflict is swallowed, and the finalizer goes
// anyway: the label is left for good on a namespace whose cluster is gone.
// The previous releaseDeleting unlabelled without a resourceVersion and
// returned every error but NotFound.
func TestReviewReleaseKeepsFinalizerWhenUnlabelRefused(t *testing.T) {
	mc, ns, _, g, s := reviewSignalFixture(t, false, false)
	plan := decision.PlanTeardown(g, s)
	rec := &writes{}
	a := reviewAdapter(t, rec, ns)
	if _, err := a.execute(context.Background(), a.Teardowns.of(mc.GetName(), mc.GetUID()), newClusterPatch(a.Client, mc), s, plan); err != nil {
		t.Logf("execute: %v", err)
	}
	t.Logf("patches: %v", rec.patches)
	if len(rec.patches) > 1 && rec.patches[len(rec.patches)-1] == "c1" {
		t.Errorf("the namespace's unlabel was refused (Conflict), yet the cluster's finalizer was removed: %v", rec.patches)
	}
}

// TestReviewForceWritesOnExactlyItsObject: writes.go promises "the
// UID is a precondition of every write". The force (and the cluster's own
// finalizer removal) is a JSON patch that tests only the finalizer's
// position, not the UID: a plan made on a cache that still shows the old
// work (uid old, deleting) removes the work agent's finalizer from the
// work recreated under the same name (uid new), which is not being deleted.
func TestReviewForceWritesOnExactlyItsObject(t *testing.T) {
	mc, _, _, _, _ := reviewSignalFixture(t, false, true)
	fresh := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "c1", UID: "new",
		Finalizers: []string{v1alpha1.WorkAgentFinalizer}}}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = workv1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fresh).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == "ManagedCluster" {
				return nil // recordForcing
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	metrics := metrics.NewMetrics()
	a := &ClusterTeardown{ClusterWriter: ClusterWriter{Client: c, Recorder: events.NewFakeRecorder(100), Metrics: metrics}, Teardowns: NewTeardowns(metrics),
		records: &record.Writer{Client: c, Reader: c, Namespace: "cleanup-operator-system"}}

	// What the cache still shows: the previous work of that name, deleting.
	deleting := metav1.Now()
	stale := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "c1", UID: "old",
		DeletionTimestamp: &deleting, Finalizers: []string{v1alpha1.WorkAgentFinalizer}}}
	stale.SetGroupVersionKind(workv1.GroupVersion.WithKind("ManifestWork"))
	act := decision.Action{Verb: decision.VerbForce, Resource: "manifestworks.work.open-cluster-management.io", Namespace: "c1", Name: "app",
		UID: "old", Meta: stale, Finalizer: v1alpha1.WorkAgentFinalizer, For: "the timeout passed"}
	if _, err := a.force(context.Background(), newClusterPatch(c, mc), &decision.Plan{Strategy: v1alpha1.RemoveStrategyBestEffort}, []decision.Action{act}); err != nil {
		t.Logf("force: %v", err)
	}
	got := &workv1.ManifestWork{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "c1", Name: "app"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) == 0 {
		t.Errorf("the work agent's finalizer was removed from work c1/app uid %s (not being deleted), for an action on uid %s", got.UID, act.UID)
	}
}
