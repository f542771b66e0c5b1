package operator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"
	"unsafe"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// appliedWork is a ManifestWork as a hub holds it once its agent applied it:
// two manifests, the work's conditions, and per manifest the agent's
// conditions and status feedback.
func appliedWork() *workv1.ManifestWork {
	at := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	cond := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: reason + " by the work agent",
			ObservedGeneration: 2, LastTransitionTime: at}
	}
	return &workv1.ManifestWork{
		TypeMeta: metav1.TypeMeta{APIVersion: "work.open-cluster-management.io/v1", Kind: "ManifestWork"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "app", Namespace: "cluster-1", UID: "u-1", ResourceVersion: "42", Generation: 2, CreationTimestamp: at,
			Labels:      map[string]string{"app": "web", "cleanup.fleetops.dev/managed-by": "cleanup-operator"},
			Annotations: map[string]string{"team": "platform"},
			Finalizers:  []string{"cluster.open-cluster-management.io/manifest-work-cleanup"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}},
		},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"},"data":{"k":"v"}}`)}},
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"}}`)}},
			}},
			DeleteOption: &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
				SelectivelyOrphan: &workv1.SelectivelyOrphan{OrphaningRules: []workv1.OrphaningRule{{Resource: "configmaps", Namespace: "default", Name: "a"}}}},
		},
		Status: workv1.ManifestWorkStatus{
			Conditions: []metav1.Condition{cond(workv1.WorkApplied, "AppliedManifestWorkComplete"), cond(workv1.WorkAvailable, "ResourcesAvailable")},
			ResourceStatus: workv1.ManifestResourceStatus{Manifests: []workv1.ManifestCondition{
				{
					ResourceMeta: workv1.ManifestResourceMeta{Ordinal: 0, Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Name: "a", Namespace: "default"},
					Conditions:   []metav1.Condition{cond("Applied", "AppliedManifestComplete"), cond("Available", "ResourceAvailable")},
				},
				{
					ResourceMeta: workv1.ManifestResourceMeta{Ordinal: 1, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Name: "web", Namespace: "default"},
					StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{{Name: "replicas",
						Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptrTo[int64](3)}}}},
					Conditions: []metav1.Condition{cond("Applied", "AppliedManifestComplete"), cond("StatusFeedbackSynced", "StatusFeedbackSynced")},
				},
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// cached is appliedWork as the cache must hold it: everything a decision
// reads, nothing else.
func cached() *workv1.ManifestWork {
	w := appliedWork()
	w.ManagedFields = nil
	// Of each manifest, its identity; the ConfigMap's data is gone.
	w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`)
	for i := range w.Status.ResourceStatus.Manifests {
		w.Status.ResourceStatus.Manifests[i].Conditions = nil
		w.Status.ResourceStatus.Manifests[i].StatusFeedbacks = workv1.StatusFeedbackResult{}
	}
	return w
}

func TestTransformManifestWork(t *testing.T) {
	g := NewWithT(t)

	// The manager's one transform, on a typed work.
	got, err := operator.Transform(appliedWork())
	g.Expect(err).NotTo(HaveOccurred())
	w := got.(*workv1.ManifestWork)
	g.Expect(w).To(Equal(cached()))
	// Spelled out, what the decisions read stays.
	g.Expect(w.Labels).To(HaveKeyWithValue("app", "web"))
	g.Expect(w.Finalizers).To(HaveLen(1))
	g.Expect(w.Spec.Workload.Manifests).To(HaveLen(2))
	g.Expect(string(w.Spec.Workload.Manifests[0].Raw)).To(MatchJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`))
	g.Expect(string(w.Spec.Workload.Manifests[1].Raw)).To(MatchJSON(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"}}`))
	g.Expect(w.Spec.DeleteOption.SelectivelyOrphan.OrphaningRules).To(HaveLen(1))
	g.Expect(w.Status.Conditions).To(HaveLen(2))
	g.Expect(w.Status.Conditions[0].ObservedGeneration).To(BeEquivalentTo(2))
	g.Expect(w.Status.ResourceStatus.Manifests[1].ResourceMeta.Resource).To(Equal("deployments"))
	g.Expect(w.ManagedFields).To(BeNil())

	// Unstructured, the same.
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(appliedWork())
	g.Expect(err).NotTo(HaveOccurred())
	got, err = operator.Transform(&unstructured.Unstructured{Object: raw})
	g.Expect(err).NotTo(HaveOccurred())
	u := got.(*unstructured.Unstructured).Object
	g.Expect(u).To(HaveKey("status"))
	for _, m := range u["status"].(map[string]any)["resourceStatus"].(map[string]any)["manifests"].([]any) {
		g.Expect(m).To(HaveKey("resourceMeta"))
		g.Expect(m).NotTo(HaveKey("conditions"))
		g.Expect(m).NotTo(HaveKey("statusFeedback"))
	}
	back := &workv1.ManifestWork{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u, back)).To(Succeed())
	// Through JSON: the round trip changes the time stamps' location only.
	gotJSON, err := json.Marshal(back)
	g.Expect(err).NotTo(HaveOccurred())
	wantJSON, err := json.Marshal(cached())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotJSON).To(MatchJSON(wantJSON))
}

// Works decoded apart hold their shared strings once after the transform,
// with the same values.
func TestTransformManifestWorkSharesStrings(t *testing.T) {
	g := NewWithT(t)
	decode := func() *workv1.ManifestWork {
		data, err := json.Marshal(appliedWork())
		g.Expect(err).NotTo(HaveOccurred())
		w := &workv1.ManifestWork{}
		g.Expect(json.Unmarshal(data, w)).To(Succeed())
		got, err := operator.Transform(w)
		g.Expect(err).NotTo(HaveOccurred())
		return got.(*workv1.ManifestWork)
	}
	a, b := decode(), decode()
	g.Expect(a).To(Equal(b))
	gotJSON, err := json.Marshal(a)
	g.Expect(err).NotTo(HaveOccurred())
	wantJSON, err := json.Marshal(cached())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotJSON).To(MatchJSON(wantJSON))
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	g.Expect(same(a.Namespace, b.Namespace)).To(BeTrue(), "namespace")
	g.Expect(same(a.Kind, b.Kind) && same(a.APIVersion, b.APIVersion)).To(BeTrue(), "kind")
	g.Expect(same(a.Finalizers[0], b.Finalizers[0])).To(BeTrue(), "finalizer")
	g.Expect(same(a.Labels["app"], b.Labels["app"])).To(BeTrue(), "label value")
	g.Expect(same(a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)).To(BeTrue(), "condition reason")
	g.Expect(same(a.Name, b.Name)).To(BeFalse(), "a name is each work's own")
}

// Of other kinds the transform drops managedFields only.
func TestTransformOtherKinds(t *testing.T) {
	g := NewWithT(t)
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": "c1", "managedFields": []any{map[string]any{"manager": "registration"}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "ManagedClusterConditionAvailable", "status": "True"}},
			"resourceStatus": map[string]any{"manifests": []any{map[string]any{"conditions": []any{}}}}},
	}}
	want := mc.DeepCopy()
	unstructured.RemoveNestedField(want.Object, "metadata", "managedFields")
	got, err := operator.Transform(mc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.(*unstructured.Unstructured).Object).To(Equal(want.Object))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data: map[string]string{"k": "v"}}
	got, err = operator.Transform(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.(*corev1.ConfigMap).ManagedFields).To(BeNil())
	g.Expect(got.(*corev1.ConfigMap).Data).To(HaveKeyWithValue("k", "v"))

	// A teardown record keeps its labels and annotations, not its content;
	// a ConfigMap that only looks like one keeps everything.
	labels := map[string]string{record.RecordLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedBy, record.ClusterLabel: "c1"}
	rec := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "teardown-c1-12345678", Labels: labels,
		Annotations: map[string]string{record.EndAnnotation: "2026-11-23T10:00:00Z"}},
		Data: map[string]string{record.JSONKey: "{}"}, BinaryData: map[string][]byte{record.GzipKey: {1}}}
	got, err = operator.Transform(rec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.(*corev1.ConfigMap).Data).To(BeNil())
	g.Expect(got.(*corev1.ConfigMap).BinaryData).To(BeNil())
	g.Expect(got.(*corev1.ConfigMap).Labels).To(Equal(labels))
	g.Expect(got.(*corev1.ConfigMap).Annotations).To(HaveKey(record.EndAnnotation))
	lookalike := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{record.RecordLabel: "true"}},
		Data: map[string]string{"k": "v"}}
	got, err = operator.Transform(lookalike)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.(*corev1.ConfigMap).Data).To(HaveKeyWithValue("k", "v"))
}

// TestCachedManifestWork reads a work through a cache configured as the
// manager's: it holds the transformed work.
func TestCachedManifestWork(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-1"}})).To(Succeed())
	w := appliedWork()
	status := w.Status
	w.ObjectMeta = metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: w.Labels, Annotations: w.Annotations, Finalizers: w.Finalizers}
	w.Status = workv1.ManifestWorkStatus{}
	g.Expect(k8s.Create(ctx, w)).To(Succeed())
	w.Status = status
	g.Expect(k8s.Status().Update(ctx, w)).To(Succeed())

	opts := operator.ManagerOptions().Cache
	opts.Scheme = operator.NewScheme()
	c, err := cache.New(env.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())

	check := func(g Gomega, got *workv1.ManifestWork) {
		g.Expect(got.ManagedFields).To(BeEmpty())
		g.Expect(got.Status.Conditions).To(HaveLen(2))
		g.Expect(got.Status.ResourceStatus.Manifests).To(HaveLen(2))
		for i, m := range got.Status.ResourceStatus.Manifests {
			g.Expect(m.ResourceMeta).To(Equal(status.ResourceStatus.Manifests[i].ResourceMeta))
			g.Expect(m.Conditions).To(BeEmpty())
			g.Expect(m.StatusFeedbacks.Values).To(BeEmpty())
		}
		g.Expect(got.Spec.Workload.Manifests).To(HaveLen(2))
		g.Expect(string(got.Spec.Workload.Manifests[0].Raw)).To(MatchJSON(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}`))
		g.Expect(got.Spec.DeleteOption).NotTo(BeNil())
	}
	g.Eventually(func(g Gomega) {
		got := &workv1.ManifestWork{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
		check(g, got)
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Read unstructured, as the manager's client may, the same.
	g.Eventually(func(g Gomega) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(workv1.GroupVersion.WithKind("ManifestWork"))
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(w), u)).To(Succeed())
		got := &workv1.ManifestWork{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, got)).To(Succeed())
		check(g, got)
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The API server still has it all.
	live := &workv1.ManifestWork{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(w), live)).To(Succeed())
	g.Expect(live.Status.ResourceStatus.Manifests[0].Conditions).To(HaveLen(2))
	g.Expect(string(live.Spec.Workload.Manifests[0].Raw)).To(ContainSubstring(`"data":{"k":"v"}`))
}
