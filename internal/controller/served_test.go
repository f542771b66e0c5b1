package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// widgetCRD is a namespaced CRD of the given group and plural, served at v1.
func widgetCRD(group, plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List", Singular: strings.ToLower(kind)},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

func readyOf(g Gomega, name string) *metav1.Condition {
	ready := condition(status(name)(g), v1alpha1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	return ready
}

var _ = Describe("Resources the API server does not serve", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("holds the gate on a monitored resource not served, naming the field, until its CRD is installed", func() {
		fleetCluster("srv-1", nil, true)
		addon("srv-1", "search")
		// A monitored object of a served resource, so that the gate still
		// waits once the CRD is installed, until the widget exists.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hold", Namespace: "srv-1"}}
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		monitored := v1alpha1.GroupVersionResource{Group: "gate.served.example.com", Version: "v1", Resource: "widgets"}
		Expect(k8s.Create(ctx, cleanupPolicy("typo-gate", v1alpha1.CleanupPolicySpec{
			MonitoredResources: []v1alpha1.MonitoredResource{
				{GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"}},
				{GroupVersionResource: monitored},
			},
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			ready := readyOf(g, "typo-gate")
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ResourceNotServedReason))
			g.Expect(ready.Message).To(ContainSubstring("spec.monitoredResources[1]: resource widgets.gate.served.example.com/v1 is not served"))
			g.Expect(ready.Message).NotTo(ContainSubstring("monitoredResources[0]"))
		}).Should(Succeed())
		governedBy("srv-1", "typo-gate")

		deleteCluster("srv-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "srv-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("held at the gate"))
			g.Expect(c.Message).To(ContainSubstring("spec.monitoredResources[1]: resource widgets.gate.served.example.com/v1 is not served"))
		}).Should(Succeed())
		Consistently(objectGone("ManagedClusterAddOn", "srv-1", "search"), "2s").Should(BeFalse())
		Expect(getCluster(Default, "srv-1").GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))

		By("installing the CRD: the gate now waits for the widget")
		crd := widgetCRD("gate.served.example.com", "widgets", "Widget")
		Expect(k8s.Create(ctx, crd)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, crd))).To(Succeed()) })
		widget := &unstructured.Unstructured{}
		widget.SetAPIVersion("gate.served.example.com/v1")
		widget.SetKind("Widget")
		widget.SetNamespace("srv-1")
		widget.SetName("w1")
		Eventually(func() error { return k8s.Create(ctx, widget) }).Should(Succeed())
		Expect(k8s.Delete(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			c := contentDelete(g, "srv-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.WaitingForMonitoredResourcesReason))
			g.Expect(c.Message).To(ContainSubstring("widgets/w1"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyOf(g, "typo-gate").Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Expect(objectGone("ManagedClusterAddOn", "srv-1", "search")()).To(BeFalse())

		Expect(k8s.Delete(ctx, widget)).To(Succeed())
		clusterGone("srv-1")
	})

	It("refuses a cluster-scoped monitored resource or stage, naming the field, and holds the teardown without listing it", func() {
		fleetCluster("srv-cs", nil, true)
		addon("srv-cs", "search")
		Expect(k8s.Create(ctx, cleanupPolicy("scoped", v1alpha1.CleanupPolicySpec{
			MonitoredResources: []v1alpha1.MonitoredResource{
				{GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "secrets"}},
				{GroupVersionResource: v1alpha1.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}},
			},
			DeletionStages: []v1alpha1.DeletionStage{
				{Name: "roles", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}},
				{Name: "addons", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}},
			},
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			ready := readyOf(g, "scoped")
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ResourceNotServedReason))
			g.Expect(ready.Message).To(ContainSubstring("spec.monitoredResources[1]: resource managedclusters.cluster.open-cluster-management.io/v1 is cluster-scoped"))
			g.Expect(ready.Message).To(ContainSubstring("spec.deletionStages[0]: resource clusterroles.rbac.authorization.k8s.io/v1 is cluster-scoped"))
			g.Expect(ready.Message).NotTo(ContainSubstring("monitoredResources[0]"))
			g.Expect(ready.Message).NotTo(ContainSubstring("deletionStages[1]"))
		}).Should(Succeed())
		governedBy("srv-cs", "scoped")

		deleteCluster("srv-cs")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "srv-cs")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("held at the gate"))
			g.Expect(c.Message).To(ContainSubstring("spec.monitoredResources[1]: resource managedclusters.cluster.open-cluster-management.io/v1 is cluster-scoped"))
		}).Should(Succeed())
		Consistently(objectGone("ManagedClusterAddOn", "srv-cs", "search"), "2s").Should(BeFalse())
		Expect(getCluster(Default, "srv-cs").GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
	})

	It("holds at a stage whose resource is not served, until the stage is removed from the policy", func() {
		fleetCluster("srv-2", nil, true)
		addon("srv-2", "search")
		work("srv-2", "app", nil)
		p := cleanupPolicy("typo-stage", v1alpha1.CleanupPolicySpec{
			DeletionStages: []v1alpha1.DeletionStage{
				{Name: "addons", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}},
				{Name: "gadgets", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "stage.served.example.com", Version: "v1", Resource: "gadgets"}},
				{Name: "works", GroupVersionResource: gvrWorks()},
			},
		})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			ready := readyOf(g, "typo-stage")
			g.Expect(ready.Reason).To(Equal(v1alpha1.ResourceNotServedReason))
			g.Expect(ready.Message).To(ContainSubstring("spec.deletionStages[1]: resource gadgets.stage.served.example.com/v1 is not served"))
		}).Should(Succeed())
		governedBy("srv-2", "typo-stage")

		deleteCluster("srv-2")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "srv-2")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("held at stage gadgets (2 of 3)"))
			g.Expect(c.Message).To(ContainSubstring("spec.deletionStages[1]"))
		}).Should(Succeed())
		Expect(objectGone("ManagedClusterAddOn", "srv-2", "search")()).To(BeTrue(), "the stage before it ran")
		Consistently(objectGone("ManifestWork", "srv-2", "app"), "2s").Should(BeFalse(), "a stage after it ran")

		By("removing the stage from the policy")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.DeletionStages = append(p.Spec.DeletionStages[:1], p.Spec.DeletionStages[2])
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		clusterGone("srv-2")
		Expect(objectGone("ManifestWork", "srv-2", "app")()).To(BeTrue())
	})
})
