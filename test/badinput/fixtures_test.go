package badinput

import (
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func managedCluster(name string) *unstructured.Unstructured {
	return object("cluster.open-cluster-management.io/v1", "ManagedCluster", "", name)
}

func manifestWork(namespace, name string) *unstructured.Unstructured {
	return object("work.open-cluster-management.io/v1", "ManifestWork", namespace, name)
}

func addOn(namespace, name string) *unstructured.Unstructured {
	return object("addon.open-cluster-management.io/v1alpha1", "ManagedClusterAddOn", namespace, name)
}

func cleanupPolicy(name string) *unstructured.Unstructured {
	return object(v1alpha1.GroupVersion.String(), "CleanupPolicy", "", name)
}

// fleetCluster creates a ManagedCluster with the given labels and
// annotations, its namespace, one ManifestWork and one add-on: the content
// a wrong decision would delete.
func fleetCluster(name string, labels, annotations map[string]string, finalizers ...string) {
	mc := managedCluster(name)
	mc.SetLabels(labels)
	mc.SetAnnotations(annotations)
	mc.SetFinalizers(finalizers)
	Expect(unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient")).To(Succeed())
	Expect(k8s.Create(ctx, mc)).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{decision.OCMClusterNameLabel: name}}})).To(Succeed())
	w := manifestWork(name, "app")
	Expect(unstructured.SetNestedSlice(w.Object, []any{map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app", "namespace": "default"},
	}}, "spec", "workload", "manifests")).To(Succeed())
	Expect(k8s.Create(ctx, w)).To(Succeed())
	a := addOn(name, "agent")
	Expect(unstructured.SetNestedField(a.Object, map[string]any{}, "spec")).To(Succeed())
	Expect(k8s.Create(ctx, a)).To(Succeed())
}

// contentIntact says whether the cluster's namespace, work and add-on all
// exist and none is being deleted.
func contentIntact(cluster string) error {
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster}},
		manifestWork(cluster, "app"), addOn(cluster, "agent"),
	} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		if o.GetDeletionTimestamp() != nil {
			return &deletingError{o}
		}
	}
	return nil
}

type deletingError struct{ o client.Object }

func (e *deletingError) Error() string {
	return e.o.GetObjectKind().GroupVersionKind().Kind + " " + e.o.GetNamespace() + "/" + e.o.GetName() + " is being deleted"
}

// contentGone says whether the cluster's work and add-on are gone and its
// namespace gone or being deleted.
func contentGone(cluster string) bool {
	for _, o := range []client.Object{manifestWork(cluster, "app"), addOn(cluster, "agent")} {
		if !apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(o), o)) {
			return false
		}
	}
	ns := &corev1.Namespace{}
	err := k8s.Get(ctx, client.ObjectKey{Name: cluster}, ns)
	return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)
}

// spec parses a CleanupPolicy spec written in YAML.
func spec(s string) map[string]any {
	var m map[string]any
	Expect(yaml.Unmarshal([]byte(s), &m)).To(Succeed())
	return m
}

// createPolicy creates a CleanupPolicy with the given spec.
func createPolicy(name string, s map[string]any, opts ...client.CreateOption) error {
	p := cleanupPolicy(name)
	p.Object["spec"] = s
	return k8s.Create(ctx, p, opts...)
}

// policyCondition returns a policy's condition of the given type once its
// status describes its latest generation, else nil.
func policyCondition(name, typ string) *metav1.Condition {
	p := cleanupPolicy(name)
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, p)).To(Succeed())
	observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
	if observed != p.GetGeneration() {
		return nil
	}
	return condition(p, typ)
}

// condition reads a condition from an object's status.
func condition(o *unstructured.Unstructured, typ string) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m, _ := r.(map[string]any)
		var c metav1.Condition
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c)).To(Succeed())
		conds = append(conds, c)
	}
	return meta.FindStatusCondition(conds, typ)
}

// clusterCondition returns the cluster's ContentDeleteSuccess condition.
func clusterCondition(name string) *metav1.Condition {
	mc := managedCluster(name)
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, mc)).To(Succeed())
	return condition(mc, v1alpha1.ContentDeleteSuccessCondition)
}
