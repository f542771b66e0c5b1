package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
)

// TestReviewDeletingSuspendedPolicyReleasesItsClusters: the CleanupPolicy
// reconciler writes nothing for a suspended policy, its in-use finalizer
// included, so a suspended policy that is deleted stays, Terminating. But
// snapshot.CompileAll leaves it out of Ranked and decision.suspension looks
// the cluster's pin up in Ranked only: the ManagedCluster reconcile of a
// cluster it governs (not being deleted) is not suspended, and releases
// it: the operator's finalizer and annotation are removed and an Event is
// written, for a cluster a suspended policy governs.
func TestReviewDeletingSuspendedPolicyReleasesItsClusters(t *testing.T) {
	t.Run("control: the suspended policy not being deleted", func(t *testing.T) { reviewSuspendedRelease(t, false) })
	t.Run("the suspended policy being deleted", func(t *testing.T) { reviewSuspendedRelease(t, true) })
}

func reviewSuspendedRelease(t *testing.T, policyDeleting bool) {
	reviewSuspended(t, policyDeleting, false, "1h")
}

// TestReviewUndecodableSuspendedPolicyWritesOnItsDeletingCluster: a
// suspended policy stored with a value the operator cannot decode (a
// timeout that is not positive, stored without the webhook or under an
// older CRD) is reported Ready/Suspended by the CleanupPolicy reconciler
// (which reads spec.suspend raw), but governance puts it in Invalid, which
// keeps no suspend: its deleting cluster is Held, and the teardown writes
// the held report on it (ContentDeleteSuccess, a Warning Event).
func TestReviewUndecodableSuspendedPolicyWritesOnItsDeletingCluster(t *testing.T) {
	reviewSuspended(t, false, true, "-1s")
}

func reviewSuspended(t *testing.T, policyDeleting, clusterDeleting bool, timeout string) {
	env, err := cel.NewEnv(cel.Schemas{})
	if err != nil {
		t.Fatal(err)
	}
	deleting := metav1.Now()
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cleanup.fleetops.dev/v1alpha1", "kind": "CleanupPolicy",
		"metadata": map[string]any{"name": "p1", "uid": "p1", "generation": int64(2),
			"finalizers": []any{v1alpha1.InUseFinalizer}, "deletionTimestamp": deleting.UTC().Format("2006-01-02T15:04:05Z")},
		"spec": map[string]any{"suspend": true, "removeStrategy": map[string]any{"default": "Required", "timeout": timeout}},
	}}
	if !policyDeleting {
		unstructured.RemoveNestedField(policy.Object, "metadata", "deletionTimestamp")
	}
	mc := newManagedCluster()
	mc.SetName("c1")
	mc.SetUID(types.UID("c1"))
	mc.SetFinalizers([]string{v1alpha1.ClusterCleanupFinalizer})
	mc.SetAnnotations(map[string]string{v1alpha1.GoverningPolicyAnnotation: "p1"})
	if clusterDeleting {
		mc.SetDeletionTimestamp(&deleting)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1", UID: "ns"}}
	s := scheme.New()
	_ = workv1.AddToScheme(s)
	var patched []string
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(policy, mc, ns).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patched = append(patched, obj.GetObjectKind().GroupVersionKind().Kind+"/"+obj.GetName())
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patched = append(patched, obj.GetObjectKind().GroupVersionKind().Kind+"/"+obj.GetName()+"/"+sub)
			return nil
		},
	}).Build()
	rec := events.NewFakeRecorder(10)
	a := &ManagedClusterAdapter{Client: c, Recorder: rec, Metrics: NewMetrics(), inflight: newInflight(), apiReader: c}
	r := &Reconciler[*unstructured.Unstructured]{Client: c, Adapter: a,
		Reader: &snapshot.Reader{Client: c, Cache: cel.NewCache(env), Governance: decision.NewGovernance(), APIReader: c}}

	// The premise: the policy is suspended and stays (its finalizer).
	got := newCleanupPolicy()
	if err := c.Get(context.Background(), client.ObjectKey{Name: "p1"}, got); err != nil || (got.GetDeletionTimestamp() != nil) != policyDeleting {
		t.Fatalf("premise: the suspended policy is Terminating: %v", err)
	}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "c1"}}); err != nil {
		t.Logf("reconcile: %v", err)
	}
	after := newManagedCluster()
	if err := c.Get(context.Background(), client.ObjectKey{Name: "c1"}, after); err != nil {
		t.Fatal(err)
	}
	if len(patched) > 0 || len(rec.Events) > 0 {
		var evs []string
		for len(rec.Events) > 0 {
			evs = append(evs, <-rec.Events)
		}
		t.Fatalf("writes for a cluster the suspended policy p1 governs: patches %v, finalizers now %v, annotations now %v, events %v",
			patched, after.GetFinalizers(), after.GetAnnotations(), evs)
	}
}
