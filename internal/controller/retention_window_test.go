package controller_test

import (
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// endedRecordOf saves the record of a teardown of a policy's cluster that
// began began ago and ended a minute later, and returns its name.
func endedRecordOf(cluster, uid, policy string, began time.Duration) string {
	start := metav1.NewTime(time.Now().Add(-began).Truncate(time.Second))
	end := metav1.NewTime(start.Add(time.Minute))
	r := &record.Record{Cluster: cluster, UID: typesUID(uid), Policy: policy, Start: start, End: &end, Entries: []record.Entry{}}
	r.Name = record.Name(cluster, r.UID, false)
	_, err := record.Save(ctx, k8s, record.DefaultNamespace, r, nil)
	Expect(err).NotTo(HaveOccurred())
	return r.Name
}

func recordExists(name string) bool {
	err := k8s.Get(ctx, client.ObjectKey{Namespace: record.DefaultNamespace, Name: name}, &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

var _ = Describe("Teardown records a blast-radius window still counts", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(45 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("are kept past --teardown-record-max-age while the policy's window counts them, and counted", func() {
		// Stored while records were kept 90 days: admitted with its 2h window.
		fleetCluster("rw-a", map[string]string{"burst": "rw"}, true)
		work("rw-a", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("rw-window", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'burst'].orValue('') == 'rw'",
			BlastRadius:     &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1), Window: &metav1.Duration{Duration: 2 * time.Hour}},
		}))).To(Succeed())
		governedBy("rw-a", "rw-window")
		counted := endedRecordOf("rw-counted", "11111111-0001", "rw-window", 90*time.Minute)
		past := endedRecordOf("rw-past", "11111111-0002", "rw-window", 150*time.Minute)
		gone := endedRecordOf("rw-gone", "11111111-0003", "rw-no-such-policy", 90*time.Minute)

		By("the operator restarted keeping records one hour: its sweep runs at start")
		stopManager()
		startManagerWith(nil, operator.Options{Records: teardown.RecordOptions{Retention: record.Retention{MaxAge: time.Hour}}})
		DeferCleanup(func() {
			stopManager()
			startManager()
		})
		Eventually(func() bool { return recordExists(past) }).Should(BeFalse(), "a record past the window was kept")
		Eventually(func() bool { return recordExists(gone) }).Should(BeFalse(), "a record of no policy was kept past the age")
		Consistently(func() bool { return recordExists(counted) }, "2s").Should(BeTrue(), "a record the window counts was pruned")

		By("the record kept counts: the next teardown is past the budget")
		deleteCluster("rw-a")
		msg := heldByBudget("rw-a", v1alpha1.BlastRadiusExceededReason)
		Expect(msg).To(ContainSubstring("CleanupPolicy rw-window (maxTeardowns 1 within 2h0m0s)"))
		Expect(msg).To(ContainSubstring("rw-counted, rw-a"))
		release("rw-a", 1, time.Now())
		clusterGone("rw-a")
		Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: record.DefaultNamespace, Name: counted}})).To(Succeed())
	})
})
