package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The operator's names, as the API contract states them. The suite talks to
// the operator only through the API server, so it does not import them.
const (
	clusterCleanupFinalizer = "cleanup.fleetops.dev/cluster-cleanup"
	clusterDeletingLabel    = "cleanup.fleetops.dev/cluster-deleting"
	// governedLabel, with governingPolicyAnnotation, is the operator's mark
	// on a governed cluster's namespace: the admission policy ocmHoldPolicy
	// refuses OCM's gc the deletes of add-ons and works there.
	governedLabel             = "cleanup.fleetops.dev/governed"
	ocmHoldPolicy             = "cleanup-operator-ocm-cleanup-hold"
	governingPolicyAnnotation = "cleanup.fleetops.dev/policy"
	contentDeleteCondition    = "ContentDeleteSuccess"
	cleanupPriorityAnnotation = "open-cluster-management.io/cleanup-priority"
)

// Names the suite uses.
const (
	// workloadNamespace is the namespace on the managed cluster where the
	// works' manifests go. It is not the cluster namespace on the hub, so
	// what is found there after a cleanup is what the work agent left.
	workloadNamespace = "workloads"
	scenarioLabel     = "e2e.fleetops.dev/scenario"
	holdFinalizer     = "e2e.fleetops.dev/hold"

	backupGroup    = "e2e.fleetops.dev"
	backupResource = "backups"
)

var (
	cleanupPolicyGVR  = schema.GroupVersionResource{Group: "cleanup.fleetops.dev", Version: "v1alpha1", Resource: "cleanuppolicies"}
	managedClusterGVR = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}
	manifestWorkGVR   = schema.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
	addonGVR          = schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	namespaceGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMapGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deploymentGVR     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	backupGVR         = schema.GroupVersionResource{Group: backupGroup, Version: "v1", Resource: backupResource}
)

// prepareFleet creates what every scenario shares: the workload namespace on
// the managed cluster and the CRD of the test's own monitored resource.
func prepareFleet() {
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace}})).To(Succeed())
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: backupResource + "." + backupGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: backupGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: backupResource, Singular: "backup", Kind: "Backup", ListKind: "BackupList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	Expect(k8s.Create(ctx, crd)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		established := false
		for _, c := range crd.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		g.Expect(established).To(BeTrue())
	}).Should(Succeed())
}

// cleanupPolicy creates a CleanupPolicy from YAML and waits until the
// operator reports it Ready.
func cleanupPolicy(manifest string) *unstructured.Unstructured {
	GinkgoHelper()
	p := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(manifest), &p.Object)).To(Succeed())
	Expect(k8s.Create(ctx, p)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		g.Expect(condition(p, "Ready")).To(HaveField("Status", metav1.ConditionTrue), "CleanupPolicy %s is not Ready", p.GetName())
	}).Should(Succeed())
	return p
}

// condition returns a condition of an unstructured object's status, or nil.
func condition(u *unstructured.Unstructured, typ string) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m, _ := r.(map[string]any)
		conds = append(conds, metav1.Condition{
			Type: fmt.Sprint(m["type"]), Status: metav1.ConditionStatus(fmt.Sprint(m["status"])),
			Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"]),
		})
	}
	return meta.FindStatusCondition(conds, typ)
}

// governedBy waits until the operator governs cluster1 with the policy.
func governedBy(policy string) {
	GinkgoHelper()
	governedNamed(clusterName, policy)
}

// contentDelete returns the cluster's ContentDeleteSuccess condition.
func contentDelete(g Gomega) *metav1.Condition {
	mc := &clusterv1.ManagedCluster{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: clusterName}, mc)).To(Succeed())
	c := meta.FindStatusCondition(mc.Status.Conditions, contentDeleteCondition)
	g.Expect(c).NotTo(BeNil(), "no ContentDeleteSuccess condition yet")
	return c
}

// app is what one ManifestWork deploys to the managed cluster: a ConfigMap
// and a Deployment in the workload namespace.
type app struct {
	work       *workv1.ManifestWork
	configMap  *corev1.ConfigMap
	deployment *appsv1.Deployment
}

// manifestWork creates a ManifestWork in cluster1's namespace holding a
// ConfigMap and a Deployment, and waits until the work agent applied them.
func manifestWork(scenario, name string, labels, annotations map[string]string) app {
	GinkgoHelper()
	objLabels := map[string]string{scenarioLabel: scenario}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: workloadNamespace, Labels: objLabels},
		Data:       map[string]string{"scenario": scenario},
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-web", Namespace: workloadNamespace, Labels: objLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1"}}},
			},
		},
	}
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: clusterName, Labels: labels, Annotations: annotations},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{
			{RawExtension: runtime.RawExtension{Raw: mustJSON(cm)}},
			{RawExtension: runtime.RawExtension{Raw: mustJSON(dep)}},
		}}},
	}
	Expect(k8s.Create(ctx, w)).To(Succeed())
	a := app{work: w, configMap: cm, deployment: dep}
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(w), w)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied)).To(BeTrue())
		g.Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}))
	}).Should(Succeed(), "the work agent has not applied work %s", name)
	return a
}

// onCluster lists which of the app's objects exist on the managed cluster.
func (a app) onCluster() []string {
	var kinds []string
	if !gone(a.configMap) {
		kinds = append(kinds, "ConfigMap")
	}
	if !gone(a.deployment) {
		kinds = append(kinds, "Deployment")
	}
	return kinds
}

// ownedByAgent says whether an object on the managed cluster still has the
// work agent's owner reference, which the garbage collector would follow.
func ownedByAgent(obj client.Object) bool {
	GinkgoHelper()
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return slices.ContainsFunc(obj.GetOwnerReferences(), func(o metav1.OwnerReference) bool {
		return o.Kind == "AppliedManifestWork"
	})
}

// workDeleteOption returns the work's deleteOption, or nil.
func workDeleteOption(g Gomega, w *workv1.ManifestWork) *workv1.DeleteOption {
	got := &workv1.ManifestWork{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed())
	return got.Spec.DeleteOption
}

func deleting(obj client.Object) bool {
	GinkgoHelper()
	got := obj.DeepCopyObject().(client.Object)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); apierrors.IsNotFound(err) {
		return true
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	return got.GetDeletionTimestamp() != nil
}

func addon(name string, finalizers ...string) *addonv1alpha1.ManagedClusterAddOn {
	GinkgoHelper()
	a := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: clusterName, Finalizers: finalizers,
	}}
	Expect(k8s.Create(ctx, a)).To(Succeed())
	return a
}

// addonAsNewest creates an add-on in the newest version the hub serves:
// v1beta1 where the add-on CRD serves it (open-cluster-management.io/api
// v1.2.0 on), else v1alpha1. The operator reads and deletes add-ons as
// v1alpha1 either way.
func addonAsNewest(name string) {
	GinkgoHelper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetAPIVersion("addon.open-cluster-management.io/v1beta1")
	u.SetKind("ManagedClusterAddOn")
	u.SetName(name)
	u.SetNamespace(clusterName)
	err := k8s.Create(ctx, u)
	if meta.IsNoMatchError(err) {
		addon(name)
		return
	}
	Expect(err).NotTo(HaveOccurred())
	fmt.Fprintf(GinkgoWriter, "add-on %s created as addon.open-cluster-management.io/v1beta1\n", name)
}

// removeFinalizer removes one finalizer from an object, as its controller
// would once done.
func removeFinalizer(obj client.Object, finalizer string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := obj.DeepCopyObject().(client.Object)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
		before := got.DeepCopyObject().(client.Object)
		got.SetFinalizers(slices.DeleteFunc(got.GetFinalizers(), func(f string) bool { return f == finalizer }))
		g.Expect(k8s.Patch(ctx, got, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).Should(Succeed())
}

func addFinalizer(obj client.Object, finalizer string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		got := obj.DeepCopyObject().(client.Object)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
		before := got.DeepCopyObject().(client.Object)
		got.SetFinalizers(append(got.GetFinalizers(), finalizer))
		g.Expect(k8s.Patch(ctx, got, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).Should(Succeed())
}

func deleteCluster() {
	GinkgoHelper()
	Expect(k8s.Delete(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName}})).To(Succeed())
}

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return raw
}

// clusterWatches are what a cluster-deletion timeline follows: the cluster,
// its namespace, its works and add-ons on the hub, and the scenario's
// objects on the managed cluster.
func clusterWatches(scenario string) []watched {
	sel := scenarioLabel + "=" + scenario
	return []watched{
		{kind: "ManagedCluster", gvr: managedClusterGVR, selector: "metadata.name=" + clusterName, facts: clusterFacts},
		{kind: "Namespace", gvr: namespaceGVR, selector: "metadata.name=" + clusterName, facts: namespaceFacts},
		{kind: "ManagedClusterAddOn", gvr: addonGVR, namespace: clusterName},
		{kind: "ManifestWork", gvr: manifestWorkGVR, namespace: clusterName, facts: workFacts},
		{kind: "managed ConfigMap", gvr: configMapGVR, namespace: workloadNamespace, selector: sel, facts: managedFacts},
		{kind: "managed Deployment", gvr: deploymentGVR, namespace: workloadNamespace, selector: sel, facts: managedFacts},
	}
}

// resetFleet returns the fleet to no cluster and no policy, whatever a
// scenario left behind: it runs after each scenario. What it must force (a
// finalizer nobody removes), it reports.
func resetFleet() {
	agent.start()
	agent.startHeartbeat()

	policies := &unstructured.UnstructuredList{}
	policies.SetGroupVersionKind(schema.GroupVersionKind{Group: cleanupPolicyGVR.Group, Version: cleanupPolicyGVR.Version, Kind: "CleanupPolicyList"})
	Expect(k8s.List(ctx, policies)).To(Succeed())
	for i := range policies.Items {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &policies.Items[i]))).To(Succeed())
	}

	works := &workv1.ManifestWorkList{}
	Expect(k8s.List(ctx, works, client.InNamespace(clusterName))).To(Succeed())
	for i := range works.Items {
		removeGone(&works.Items[i])
	}
	addons := &addonv1alpha1.ManagedClusterAddOnList{}
	Expect(k8s.List(ctx, addons, client.InNamespace(clusterName))).To(Succeed())
	for i := range addons.Items {
		removeGone(&addons.Items[i])
	}
	unprotect()
	removeGone(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName}})
	removeGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterName}})

	// What the work agent applied and a scenario left on the managed cluster.
	applied := &workv1.AppliedManifestWorkList{}
	Expect(k8s.List(ctx, applied)).To(Succeed())
	for i := range applied.Items {
		removeGone(&applied.Items[i])
	}
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &appsv1.DeploymentList{}} {
		Expect(k8s.List(ctx, list, client.InNamespace(workloadNamespace), client.HasLabels{scenarioLabel})).To(Succeed())
		Expect(meta.EachListItem(list, func(o runtime.Object) error {
			removeGone(o.(client.Object))
			return nil
		})).To(Succeed())
	}
}

// removeGone deletes an object and waits until it is gone; finalizers still
// there after a while are removed, and reported.
func removeGone(obj client.Object) {
	GinkgoHelper()
	if err := k8s.Delete(ctx, obj); apierrors.IsNotFound(err) {
		return
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	deadline := time.Now().Add(45 * time.Second)
	Eventually(func(g Gomega) {
		got := obj.DeepCopyObject().(client.Object)
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		if time.Now().After(deadline) && len(got.GetFinalizers()) > 0 {
			fmt.Fprintf(GinkgoWriter, "reset: removing finalizers %v of %T %s\n", got.GetFinalizers(), obj, client.ObjectKeyFromObject(obj))
			got.SetFinalizers(nil)
			g.Expect(client.IgnoreNotFound(k8s.Update(ctx, got))).To(Succeed())
		}
		g.Expect(false).To(BeTrue(), "%T %s is still there", obj, client.ObjectKeyFromObject(obj))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}
