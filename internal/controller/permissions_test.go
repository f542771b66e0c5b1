package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

var _ = Describe("Permissions", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	// The operator runs with the roles it ships with; a policy monitors a
	// resource those roles do not cover.
	It("holds a cleanup it cannot see, says which permission is missing, and resumes once granted", func() {
		runAsOperator()

		fleetCluster("rbac-1", nil, true)
		addon("rbac-1", "search")
		Expect(k8s.Create(ctx, cleanupPolicy("jobs-gate", v1alpha1.CleanupPolicySpec{
			MonitoredResources: monitors("batch", "v1", "jobs"),
		}))).To(Succeed())
		governedBy("rbac-1", "jobs-gate")

		deleteCluster("rbac-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "rbac-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("held, nothing is deleted: the operator may not list or watch jobs.batch"))
			g.Expect(c.Message).To(ContainSubstring("forbidden"))
		}).Should(Succeed())
		Expect(objectGone("ManagedClusterAddOn", "rbac-1", "search")()).To(BeFalse())
		Eventually(func() []string { return events("rbac-1") }).Should(ContainElement(ContainSubstring("CleanupFailed: held, nothing is deleted: the operator may not list or watch jobs.batch")))

		grantOperator("jobs-reader", "jobs", "get", "list", "watch")

		clusterGone("rbac-1")
		Expect(objectGone("ManagedClusterAddOn", "rbac-1", "search")()).To(BeTrue())
		Eventually(func(g Gomega) bool { return namespaceDeleting(g, "rbac-1") }).Should(BeTrue())
	})

	// A role that grants list but not watch: an informer would sync once
	// and then lag, and a gate could pass while a job exists.
	It("holds a cleanup whose monitored resource it may list but not watch, and resumes once watch is granted", func() {
		runAsOperator()

		grantOperator("cronjobs-lister", "cronjobs", "get", "list")

		fleetCluster("rbac-2", nil, true)
		addon("rbac-2", "search")
		Expect(k8s.Create(ctx, cleanupPolicy("cronjobs-gate", v1alpha1.CleanupPolicySpec{
			MonitoredResources: monitors("batch", "v1", "cronjobs"),
		}))).To(Succeed())
		governedBy("rbac-2", "cronjobs-gate")

		deleteCluster("rbac-2")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "rbac-2")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("held, nothing is deleted: the operator may not list or watch cronjobs.batch"))
			g.Expect(c.Message).To(ContainSubstring("watch is not allowed"))
		}).Should(Succeed())
		Expect(objectGone("ManagedClusterAddOn", "rbac-2", "search")()).To(BeFalse())

		grantOperator("cronjobs-watcher", "cronjobs", "watch")

		clusterGone("rbac-2")
		Expect(objectGone("ManagedClusterAddOn", "rbac-2", "search")()).To(BeTrue())
	})

	// The shipped roles name the decisions ConfigMaps and give a Role in
	// the operator's namespace for the records: nothing else of the hub's
	// ConfigMaps. A blast radius makes the teardown count records begun,
	// read from the cache of the operator's own ConfigMaps.
	It("publishes decisions and writes records with the roles it ships with, and may read or create no other ConfigMap", func() {
		runAsOperator()
		operatorClient := asOperator()

		fleetCluster("own-cm", nil, true)
		const ns = "policies-own-cm"
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		unrelated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, Data: map[string]string{"k": "v"}}
		Expect(k8s.Create(ctx, unrelated)).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("own-cm", v1alpha1.CleanupPolicySpec{
			Prune:       &v1alpha1.Prune{Default: v1alpha1.PruneDeleteAll},
			BlastRadius: &v1alpha1.BlastRadius{MaxTeardowns: ptr.To(intstr.FromInt32(5))},
		}))).To(Succeed())
		governedBy("own-cm", "own-cm")
		rootPolicy(ns, "baseline", []map[string]any{cpTemplate("cp", "enforce", nil, readsDecisions("cp"))}, "own-cm")
		Eventually(func(g Gomega) map[string]string { return decisions(g, ns) }).Should(Equal(map[string]string{"own-cm.cp": "DeleteAll"}))

		deleteCluster("own-cm")
		clusterGone("own-cm")
		Expect(endedRecord("own-cm").Outcome).To(Equal(v1alpha1.CompletedReason))

		By("refusing the operator any other ConfigMap outside its namespace")
		forbidden := Satisfy(apierrors.IsForbidden)
		Expect(operatorClient.Get(ctx, client.ObjectKeyFromObject(unrelated), &corev1.ConfigMap{})).To(forbidden)
		Expect(operatorClient.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))).To(forbidden)
		Expect(operatorClient.List(ctx, &corev1.ConfigMapList{})).To(forbidden)
		Expect(operatorClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "another"}})).To(forbidden)
		apply := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "another"}}
		Expect(operatorClient.Patch(ctx, apply, client.Apply, client.FieldOwner("probe"))).To(forbidden)
		Expect(operatorClient.Delete(ctx, unrelated.DeepCopy())).To(forbidden)
		// By name, everywhere; and all of its own namespace.
		Expect(operatorClient.List(ctx, &corev1.ConfigMapList{}, client.MatchingFields{"metadata.name": v1alpha1.DecisionsConfigMap})).To(Succeed())
		Expect(operatorClient.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(record.DefaultNamespace))).To(Succeed())

		By("finding no ConfigMap of the operator's but the decisions and the records")
		var all corev1.ConfigMapList
		Expect(k8s.List(ctx, &all, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy})).To(Succeed())
		Expect(all.Items).NotTo(BeEmpty())
		for _, cm := range all.Items {
			Expect(cm.Name == v1alpha1.DecisionsConfigMap || cm.Namespace == record.DefaultNamespace).To(BeTrue(),
				"the operator made ConfigMap %s/%s", cm.Namespace, cm.Name)
		}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(unrelated), unrelated)).To(Succeed())
		Expect(unrelated.Data).To(Equal(map[string]string{"k": "v"}))
	})
})

// asOperator is a client with the operator's identity and shipped roles.
func asOperator() client.Client {
	cfg, err := env.OperatorConfig(ctx)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// grantOperator grants the operator's user verbs on a resource of batch,
// hub-wide, for the rest of the spec.
func grantOperator(name, resource string, verbs ...string) { grant(name, "batch", resource, verbs...) }

// grant grants the operator's user verbs on a resource of a group,
// hub-wide, for the rest of the spec.
func grant(name, group, resource string, verbs ...string) {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}}}
	Expect(k8s.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: testenv.OperatorUser}}}
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() {
		Expect(k8s.Delete(ctx, binding)).To(Succeed())
		Expect(k8s.Delete(ctx, role)).To(Succeed())
	})
}

// runAsOperator restarts the manager with the operator's identity and
// roles for the rest of the spec.
func runAsOperator() {
	stopManager()
	cfg, err := env.OperatorConfig(ctx)
	Expect(err).NotTo(HaveOccurred())
	startManagerAs(cfg)
	DeferCleanup(func() { stopManager(); startManager() })
}
