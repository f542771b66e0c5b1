package controller_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// teardownWrites counts the writes to one cluster's objects that the audit
// log holds from its line from on, by verb and resource ("patch
// managedclusters/status", "create manifestworks (403)"): the cluster and
// its status, its namespace, the add-ons and works in it, its teardown
// record and the Events about it. The test's own delete of the cluster and
// the agent's writes to works (their finalizer and status) are left out,
// and so is the policy's status, which a fleet's teardowns share.
func teardownWrites(cluster string, from int) map[string]int {
	events, err := testenv.ReadAuditLog(auditLog)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]int{}
	for _, e := range events[from:] {
		ref := e.ObjectRef
		if e.Stage != "ResponseComplete" {
			continue
		}
		var ours bool
		switch ref.Resource {
		case "managedclusters":
			ours = ref.Name == cluster && e.Verb != "delete"
		case "namespaces":
			ours = ref.Name == cluster
		case "manifestworks", "managedclusteraddons":
			ours = ref.Namespace == cluster && e.Verb != "patch" && e.Verb != "update"
		case "configmaps":
			ours = ref.Namespace == record.DefaultNamespace && strings.HasPrefix(ref.Name, "teardown-"+cluster+"-")
		case "events":
			ours = strings.HasPrefix(ref.Name, cluster+".")
		}
		if !ours {
			continue
		}
		key := e.Verb + " " + ref.Resource
		if ref.Subresource != "" {
			key += "/" + ref.Subresource
		}
		if e.ResponseStatus.Code >= 300 {
			key += fmt.Sprintf(" (%d)", e.ResponseStatus.Code)
		}
		out[key]++
	}
	return out
}

var _ = Describe("A teardown's writes", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("costs a default teardown its deletes, its label, its finalizer, a dry run, 4 record writes, 2 conditions and 1 Event", func() {
		// A progress interval longer than the teardown, as for a storm's
		// clusters whose steps follow one another within one interval.
		stopManager()
		startManagerWith(nil, operator.Options{ProgressInterval: time.Minute})
		DeferCleanup(func() {
			stopManager()
			startManager()
		})
		const cluster = "cost-1"
		fleetCluster(cluster, map[string]string{"env": cluster}, true)
		addon(cluster, "search")
		addon(cluster, "policy")
		for i := range 3 {
			work(cluster, fmt.Sprintf("w-%d", i), nil)
		}
		Expect(k8s.Create(ctx, cleanupPolicy(cluster, v1alpha1.CleanupPolicySpec{
			ClusterSelector: fmt.Sprintf("cluster.metadata.labels[?'env'].orValue('') == '%s'", cluster),
		}))).To(Succeed())
		governedBy(cluster, cluster)
		applied(cluster, 3)
		settled()

		before, err := testenv.ReadAuditLog(auditLog)
		Expect(err).NotTo(HaveOccurred())
		deleteCluster(cluster)
		clusterGone(cluster)
		// Events are recorded asynchronously.
		Eventually(func() []string { return events(cluster) }).Should(ContainElement(HavePrefix(v1alpha1.CompletedReason + ":")))

		// The record still lists every write, each done.
		rec := endedRecord(cluster)
		Expect(rec.Resumed).To(BeFalse())
		Expect(entryKeys(rec.Entries)).To(Equal([]string{
			"signal namespaces/" + cluster + " labelled done",
			"stage/addons managedclusteraddons.addon.open-cluster-management.io/policy deleted done",
			"stage/addons managedclusteraddons.addon.open-cluster-management.io/search deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/w-0 deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/w-1 deleted done",
			"stage/manifestworks manifestworks.work.open-cluster-management.io/w-2 deleted done",
			"namespace namespaces/" + cluster + " deleted done",
		}))

		writes := teardownWrites(cluster, len(before))
		Expect(writes).To(Equal(map[string]int{
			"patch namespaces":                      1, // the deleting label
			"create manifestworks (403)":            1, // the dry run: is the namespace closed?
			"deletecollection managedclusteraddons": 1,
			"deletecollection manifestworks":        1,
			"delete namespaces":                     1,
			"patch managedclusters":                 1, // the finalizer
			// The record: begun with the add-ons' deletes, then the works',
			// the namespace's, the end.
			"create configmaps": 1,
			"update configmaps": 3,
			// The condition: the first step. The outcome is not written:
			// the cluster goes with the operator's finalizer, its only one.
			"patch managedclusters/status": 1,
			// The outcome's Event; the deletes are in the record.
			"create events": 1,
		}), "writes by verb and resource")
		Expect(rec.Outcome).To(Equal(v1alpha1.CompletedReason))
	})

	It("writes the outcome on a cluster that another finalizer keeps, and leaves that finalizer", func() {
		const cluster, keep = "cost-2", "example.com/keep"
		fleetCluster(cluster, map[string]string{"env": cluster}, true)
		work(cluster, "w-0", nil)
		Expect(k8s.Create(ctx, cleanupPolicy(cluster, v1alpha1.CleanupPolicySpec{
			ClusterSelector: fmt.Sprintf("cluster.metadata.labels[?'env'].orValue('') == '%s'", cluster),
		}))).To(Succeed())
		governedBy(cluster, cluster)
		applied(cluster, 1)
		mc := getClusterNow(cluster)
		mc.SetFinalizers(append(mc.GetFinalizers(), keep))
		Expect(k8s.Update(ctx, mc)).To(Succeed())

		deleteCluster(cluster)
		Eventually(func(g Gomega) {
			mc := getClusterNow(cluster)
			g.Expect(mc.GetFinalizers()).To(Equal([]string{keep}))
		}).Should(Succeed())
		c := contentDelete(Default, cluster)
		Expect(c.Status).To(Equal(metav1.ConditionTrue))
		Expect(c.Reason).To(Equal(v1alpha1.CompletedReason))
		Expect(endedRecord(cluster).Outcome).To(Equal(v1alpha1.CompletedReason))

		mc = getClusterNow(cluster)
		mc.SetFinalizers(nil)
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		clusterGone(cluster)
	})
})
