package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// clusterNameLabel is the label Argo CD's cluster Secrets made for OCM
// clusters carry; ConfigMaps stand in for the Secrets.
const clusterNameLabel = "apps.open-cluster-management.io/cluster-name"

const byClusterLabel = "object.metadata.labels[?'" + clusterNameLabel + "'].orValue('') == cluster.metadata.name"

// sharedConfigMap makes a ConfigMap in a shared namespace labelled for a cluster.
func sharedConfigMap(namespace, name, cluster string) {
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{clusterNameLabel: cluster}}})).To(Succeed())
}

// sharedSecret makes a Secret in a shared namespace labelled for a
// cluster, as Argo CD's cluster Secrets are.
func sharedSecret(namespace, name, cluster string) {
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{clusterNameLabel: cluster}}})).To(Succeed())
}

func secretExists(namespace, name string) bool {
	err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Secret{})
	Expect(client.IgnoreNotFound(err)).To(Succeed())
	return err == nil
}

// grantDeleteIn grants the operator delete on a core resource in one namespace.
func grantDeleteIn(namespace, name, resource string) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"delete"}}}}
	Expect(k8s.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: testenv.OperatorUser}}}
	Expect(k8s.Create(ctx, binding)).To(Succeed())
}

func configMapExists(namespace, name string) func() bool {
	return func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.ConfigMap{})
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		return err == nil
	}
}

func outsideStage(namespaces ...string) v1alpha1.DeletionStage {
	return v1alpha1.DeletionStage{Name: "argocd-clusters", When: byClusterLabel, Namespaces: namespaces,
		GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
}

func worksStage() v1alpha1.DeletionStage {
	return v1alpha1.DeletionStage{Name: "manifestworks",
		GroupVersionResource: v1alpha1.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}}
}

// grantCore grants the operator verbs on a core resource in every namespace.
func grantCore(name, resource string, verbs ...string) { grant(name, "", resource, verbs...) }

var _ = Describe("Stages outside the cluster namespace", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(60 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("refuses a stage outside the cluster namespace without a when, and every namespace", func() {
		noWhen := outsideStage("argocd")
		noWhen.When = ""
		err := k8s.Create(ctx, cleanupPolicy("outside-no-when", v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{noWhen}}))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("needs a when that selects the cluster's objects"))

		scoped := outsideStage()
		scoped.When, scoped.ClusterScoped = "", true
		err = k8s.Create(ctx, cleanupPolicy("outside-scoped-no-when", v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{scoped}}))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("needs a when that selects the cluster's objects"))

		err = k8s.Create(ctx, cleanupPolicy("outside-all", v1alpha1.CleanupPolicySpec{DeletionStages: []v1alpha1.DeletionStage{outsideStage("*")}}))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.deletionStages[0].namespaces[0]"))
		Expect(err.Error()).To(ContainSubstring("every namespace is never a stage's"))
	})

	It("deletes the cluster's objects in a listed namespace, leaves the other clusters', and records each", func() {
		fleetCluster("out-1", nil, true)
		fleetCluster("out-2", nil, true)
		sharedConfigMap("argocd-out", "cluster-out-1", "out-1")
		sharedConfigMap("argocd-out", "cluster-out-2", "out-2")
		sharedConfigMap("argocd-out", "unlabelled", "")
		Expect(k8s.Create(ctx, cleanupPolicy("outside", v1alpha1.CleanupPolicySpec{
			DeletionStages: []v1alpha1.DeletionStage{outsideStage("argocd-out"), worksStage()},
		}))).To(Succeed())
		governedBy("out-1", "outside")

		deleteCluster("out-1")
		clusterGone("out-1")
		Expect(configMapExists("argocd-out", "cluster-out-1")()).To(BeFalse())
		Expect(configMapExists("argocd-out", "cluster-out-2")()).To(BeTrue())
		Expect(configMapExists("argocd-out", "unlabelled")()).To(BeTrue())

		r := endedRecord("out-1")
		var deleted []record.Entry
		for _, e := range r.Entries {
			if e.Step == "stage/argocd-clusters" {
				deleted = append(deleted, e)
			}
		}
		Expect(deleted).To(ConsistOf(And(
			HaveField("Namespace", "argocd-out"), HaveField("Name", "cluster-out-1"), HaveField("Action", record.Deleted))))
	})

	// Nothing polls a stage outside the cluster namespace: the event of
	// the object it waits for, which names no cluster, brings the
	// teardown back.
	It("waits for an object outside that another finalizer holds, and goes on from its event", func() {
		fleetCluster("out-7", nil, true)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd-wait", Name: "cluster-out-7",
			Labels: map[string]string{clusterNameLabel: "out-7"}, Finalizers: []string{"example.com/hold"}}}
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd-wait"}}))).To(Succeed())
		Expect(k8s.Create(ctx, cm)).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("outside-wait", v1alpha1.CleanupPolicySpec{
			DeletionStages: []v1alpha1.DeletionStage{outsideStage("argocd-wait"), worksStage()},
		}))).To(Succeed())
		governedBy("out-7", "outside-wait")

		deleteCluster("out-7")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "out-7")
			g.Expect(c.Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
			g.Expect(c.Message).To(ContainSubstring("argocd-wait/cluster-out-7"))
		}).Should(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		Expect(cm.DeletionTimestamp).NotTo(BeNil())

		cm.Finalizers = nil
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		clusterGone("out-7")
	})

	It("deletes the cluster's cluster-scoped objects that its when selects, opted in", func() {
		fleetCluster("out-3", nil, true)
		for _, name := range []string{"out-3", "out-4"} {
			Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + name + "-reader"}})).To(Succeed())
		}
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster-out-4-reader"}}))).To(Succeed())
		})
		Expect(k8s.Create(ctx, cleanupPolicy("outside-scoped", v1alpha1.CleanupPolicySpec{
			DeletionStages: []v1alpha1.DeletionStage{{Name: "roles", ClusterScoped: true,
				When:                 "object.metadata.name == 'cluster-' + cluster.metadata.name + '-reader'",
				GroupVersionResource: v1alpha1.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}},
				worksStage()},
		}))).To(Succeed())
		governedBy("out-3", "outside-scoped")

		deleteCluster("out-3")
		clusterGone("out-3")
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster-out-3-reader"}, &rbacv1.ClusterRole{})).To(Satisfy(apierrors.IsNotFound))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "cluster-out-4-reader"}, &rbacv1.ClusterRole{})).To(Succeed())
	})

	// The operator's shipped roles grant no Secrets: it may list and watch
	// them (granted here, in every namespace), and delete them only once a
	// Role grants it in the namespace the stage names.
	It("holds a stage in a namespace where the operator may not delete, and goes on once granted there", func() {
		runAsOperator()
		grantCore("secrets-reader", "secrets", "get", "list", "watch")

		fleetCluster("out-5", nil, true)
		sharedSecret("argocd-rbac", "cluster-out-5", "out-5")
		sharedSecret("argocd-rbac", "cluster-out-6", "out-6")
		stage := outsideStage("argocd-rbac")
		stage.Resource = "secrets"
		Expect(k8s.Create(ctx, cleanupPolicy("outside-rbac", v1alpha1.CleanupPolicySpec{
			DeletionStages: []v1alpha1.DeletionStage{stage, worksStage()},
		}))).To(Succeed())
		governedBy("out-5", "outside-rbac")

		deleteCluster("out-5")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "out-5")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("held, nothing is deleted: the operator may not delete secrets (in namespace argocd-rbac)"))
		}).Should(Succeed())
		Expect(secretExists("argocd-rbac", "cluster-out-5")).To(BeTrue())

		grantDeleteIn("argocd-rbac", "secrets-deleter", "secrets")
		clusterGone("out-5")
		Expect(secretExists("argocd-rbac", "cluster-out-5")).To(BeFalse())
		Expect(secretExists("argocd-rbac", "cluster-out-6")).To(BeTrue())
	})
})
