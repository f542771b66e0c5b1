package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
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
})

// grantOperator grants the operator's user verbs on a resource of batch,
// hub-wide, for the rest of the spec.
func grantOperator(name, resource string, verbs ...string) {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"batch"}, Resources: []string{resource}, Verbs: verbs}}}
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
