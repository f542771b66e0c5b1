package controller_test

import (
	"context"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// fleetCluster creates a ManagedCluster, its namespace, and, if available,
// the Available condition the registration controller would set.
func fleetCluster(name string, labels map[string]string, available bool) {
	mc := managedCluster(name, labels)
	Expect(k8s.Create(ctx, mc)).To(Succeed())
	// Created after the cluster, with OCM's label, as OCM's registration does.
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{decision.OCMClusterNameLabel: name}}})).To(Succeed())
	if available {
		// On the cluster as it is now: the suite's manager may have
		// written to it since its creation.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
			conds = append(conds, map[string]any{
				"type": "ManagedClusterConditionAvailable", "status": string(metav1.ConditionTrue), "reason": "ManagedClusterAvailable",
				"message": "the agent is updating its lease", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			})
			if err := unstructured.SetNestedSlice(mc.Object, conds, "status", "conditions"); err != nil {
				return err
			}
			return k8s.Status().Update(ctx, mc)
		})).To(Succeed())
	}
}

// work creates a ManifestWork holding one ConfigMap, with the work agent's
// finalizer as the agent puts it once it applied the work.
func work(namespace, name string, annotations map[string]string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "work.open-cluster-management.io/v1",
		"kind":       "ManifestWork",
		"metadata": map[string]any{
			"name": name, "namespace": namespace,
			"finalizers": []any{v1alpha1.WorkAgentFinalizer},
		},
		"spec": map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "default"},
		}}}},
	}}
	w.SetAnnotations(annotations)
	Expect(k8s.Create(ctx, w)).To(Succeed())
	return w
}

func addon(namespace, name string) {
	a := &unstructured.Unstructured{}
	a.SetAPIVersion("addon.open-cluster-management.io/v1alpha1")
	a.SetKind("ManagedClusterAddOn")
	a.SetNamespace(namespace)
	a.SetName(name)
	Expect(unstructured.SetNestedField(a.Object, map[string]any{}, "spec")).To(Succeed())
	Expect(k8s.Create(ctx, a)).To(Succeed())
}

func objectGone(gvk string, namespace, name string) func() bool {
	return func() bool {
		u := &unstructured.Unstructured{}
		switch gvk {
		case "ManifestWork":
			u.SetAPIVersion("work.open-cluster-management.io/v1")
		case "ManagedClusterAddOn":
			u.SetAPIVersion("addon.open-cluster-management.io/v1alpha1")
		case "ManagedCluster":
			u.SetAPIVersion("cluster.open-cluster-management.io/v1")
		}
		u.SetKind(gvk)
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u))
	}
}

func getCluster(g Gomega, name string) *unstructured.Unstructured {
	mc := managedCluster("", nil)
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, mc)).To(Succeed())
	return mc
}

// contentDelete returns the cluster's ContentDeleteSuccess condition.
func contentDelete(g Gomega, name string) *metav1.Condition {
	mc := getCluster(g, name)
	raw, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m := r.(map[string]any)
		conds = append(conds, metav1.Condition{
			Type: m["type"].(string), Status: metav1.ConditionStatus(m["status"].(string)),
			Reason: m["reason"].(string), Message: m["message"].(string),
		})
	}
	c := meta.FindStatusCondition(conds, v1alpha1.ContentDeleteSuccessCondition)
	g.Expect(c).NotTo(BeNil(), "no ContentDeleteSuccess condition yet")
	return c
}

func deleteCluster(name string) {
	Expect(k8s.Delete(ctx, managedCluster(name, nil))).To(Succeed())
}

func namespaceDeleting(g Gomega, name string) bool {
	ns := &corev1.Namespace{}
	err := k8s.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return true
	}
	g.Expect(err).NotTo(HaveOccurred())
	return ns.DeletionTimestamp != nil
}

// workAgent plays OCM's work agent for the tests. It applies each work's
// latest generation and says so in the work's Applied condition, as the
// agent does; once a ManifestWork is being deleted it removes its
// finalizer, as the agent does after removing the work's resources from
// the managed cluster. Works it is told are stuck, and works of stopped
// clusters, keep their finalizer; works of stopped or lagging clusters are
// not applied. It records the order in which it saw works deleting, and the
// deleteOption each carried then.
type workAgent struct {
	mu      sync.Mutex
	stuck   map[types.NamespacedName]bool
	stopped map[string]bool
	lagging map[string]bool
	seen    []string
	options map[types.NamespacedName]string
}

func newWorkAgent() *workAgent {
	return &workAgent{stuck: map[types.NamespacedName]bool{}, stopped: map[string]bool{}, lagging: map[string]bool{},
		options: map[types.NamespacedName]string{}}
}

// setLagging makes the agent of a cluster stop applying new generations.
func (a *workAgent) setLagging(cluster string, lagging bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lagging[cluster] = lagging
}

// setStopped stops the agent of a cluster altogether.
func (a *workAgent) setStopped(cluster string, stopped bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped[cluster] = stopped
}

// deletedWith is the deleteOption propagation policy a work carried when
// the agent first saw it deleting: what the managed cluster's agent acts on.
// It is "unseen" when the agent never saw the work deleting.
func (a *workAgent) deletedWith(namespace, name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.options[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return "unseen"
	}
	return o
}

func (a *workAgent) setStuck(namespace, name string, stuck bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stuck[types.NamespacedName{Namespace: namespace, Name: name}] = stuck
}

func (a *workAgent) order() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

func (a *workAgent) run(ctx context.Context) {
	for ctx.Err() == nil {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("work.open-cluster-management.io/v1")
		list.SetKind("ManifestWorkList")
		if err := k8s.List(ctx, list); err == nil {
			for i := range list.Items {
				a.handle(ctx, &list.Items[i])
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (a *workAgent) handle(ctx context.Context, w *unstructured.Unstructured) {
	if w.GetDeletionTimestamp() == nil {
		a.apply(ctx, w)
		return
	}
	if !slices.Contains(w.GetFinalizers(), v1alpha1.WorkAgentFinalizer) {
		return
	}
	key := types.NamespacedName{Namespace: w.GetNamespace(), Name: w.GetName()}
	a.mu.Lock()
	if !slices.Contains(a.seen, key.String()) {
		a.seen = append(a.seen, key.String())
		a.options[key], _, _ = unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy")
	}
	hold := a.stuck[key] || a.stopped[key.Namespace]
	a.mu.Unlock()
	if hold {
		return
	}
	w.SetFinalizers(slices.DeleteFunc(w.GetFinalizers(), func(f string) bool { return f == v1alpha1.WorkAgentFinalizer }))
	_ = k8s.Update(ctx, w)
}

// apply reports the work's generation as applied, unless the cluster's
// agent is stopped or lagging.
func (a *workAgent) apply(ctx context.Context, w *unstructured.Unstructured) {
	a.mu.Lock()
	idle := a.stopped[w.GetNamespace()] || a.lagging[w.GetNamespace()]
	a.mu.Unlock()
	if idle {
		return
	}
	raw, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
	for _, c := range raw {
		if m, ok := c.(map[string]any); ok && m["type"] == "Applied" {
			if g, ok := m["observedGeneration"].(int64); ok && g >= w.GetGeneration() {
				return
			}
		}
	}
	applied := []any{map[string]any{"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
		"message": "applied", "observedGeneration": w.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
	_ = unstructured.SetNestedSlice(w.Object, applied, "status", "conditions")
	_ = k8s.Status().Update(ctx, w)
}

// monitors is a policy's monitoredResources: every object of one resource.
func monitors(group, version, resource string) []v1alpha1.MonitoredResource {
	return []v1alpha1.MonitoredResource{{GroupVersionResource: v1alpha1.GroupVersionResource{Group: group, Version: version, Resource: resource}}}
}

// refuseAdmission creates an admission policy, and its binding, that
// refuses the operations of rule where validation is false (and every
// condition holds); both go when the spec ends. Deleting the binding it
// returns lifts the refusal.
func refuseAdmission(name string, rule admissionregistrationv1.RuleWithOperations, validation admissionregistrationv1.Validation,
	conditions ...admissionregistrationv1.MatchCondition) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				{RuleWithOperations: rule}}},
			MatchConditions: conditions,
			Validations:     []admissionregistrationv1.Validation{validation},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	Expect(k8s.Create(ctx, policy)).To(Succeed())
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, binding))).To(Succeed())
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, policy))).To(Succeed())
	})
	return binding
}
