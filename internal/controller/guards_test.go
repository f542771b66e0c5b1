package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

var _ = Describe("Guards", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("keeps a namespace that existed before the cluster named like it, says why, and deletes the rest", func() {
		// The namespace OCM made for a cluster: fleetCluster creates it
		// after the cluster, with the label.
		fleetCluster("ns-made", nil, true)
		// An unrelated namespace, older than the cluster, labelled by hand
		// with OCM's cluster-name label as OCM would label it.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-tools",
			Labels: map[string]string{decision.OCMClusterNameLabel: "team-tools"}}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed()) })
		// Creation times have a second's granularity: the cluster comes a
		// second later, or its namespace would count as made for it.
		Eventually(func() bool { return time.Since(ns.CreationTimestamp.Time) > 1100*time.Millisecond }).Should(BeTrue())
		Expect(k8s.Create(ctx, managedCluster("team-tools", nil))).To(Succeed())
		work("team-tools", "app", nil)
		Expect(k8s.Create(ctx, cleanupPolicy("ns-guard", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		governedBy("team-tools", "ns-guard")

		deleteCluster("team-tools")
		clusterGone("team-tools")
		Expect(objectGone("ManifestWork", "team-tools", "app")()).To(BeTrue())
		got := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "team-tools"}, got)).To(Succeed())
		Expect(got.DeletionTimestamp).To(BeNil())
		Expect(got.Labels).NotTo(HaveKey(v1alpha1.ClusterDeletingLabel))

		why := "namespace team-tools was created at " + got.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z") + ", before the ManagedCluster"
		r := endedRecord("team-tools")
		Expect(r.Message).To(ContainSubstring("the namespace was kept: " + why))
		var kept []string
		for _, e := range r.Entries {
			if e.Step == "namespace" {
				kept = append(kept, string(e.Action)+": "+e.Note)
			}
		}
		Expect(kept).To(ContainElement(ContainSubstring("kept: " + why)))
		Eventually(func() []string { return events("team-tools") }).Should(ContainElement(ContainSubstring("the namespace was kept: " + why)))

		// The namespace OCM made is deleted as before.
		governedBy("ns-made", "ns-guard")
		deleteCluster("ns-made")
		clusterGone("ns-made")
		Eventually(func(g Gomega) bool { return namespaceDeleting(g, "ns-made") }).Should(BeTrue())
	})

	It("accepts a person's own kubectl annotate as a deletion confirmation, stamping when it saw it", func() {
		fleetCluster("bare-conf", map[string]string{"env": "prod"}, true)
		Expect(k8s.Create(ctx, cleanupPolicy("bare-conf", v1alpha1.CleanupPolicySpec{DeletionProtection: "true"}))).To(Succeed())
		governedBy("bare-conf", "bare-conf")
		Eventually(func(g Gomega) bool { return protected(g, "bare-conf") }).Should(BeTrue())
		DeferCleanup(unprotectAll)

		before := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
		Expect(annotateCluster("bare-conf", map[string]string{v1alpha1.DeleteConfirmedAnnotation: "bare-conf"})).To(Succeed())
		var at string
		Eventually(func(g Gomega) {
			a := getCluster(g, "bare-conf").GetAnnotations()
			at = a[v1alpha1.DeleteConfirmedAtAnnotation]
			g.Expect(at).NotTo(BeEmpty(), "not stamped")
			g.Expect(a).To(HaveKeyWithValue(v1alpha1.DeleteConfirmationAcceptedAnnotation, at))
		}).Should(Succeed())
		stamped, err := time.Parse(time.RFC3339, at)
		Expect(err).NotTo(HaveOccurred())
		Expect(stamped).NotTo(BeTemporally("<", before))
		Eventually(func() []string { return events("bare-conf") }).Should(ContainElement(ContainSubstring("deletion confirmation " +
			v1alpha1.DeleteConfirmedAnnotation + "=bare-conf seen at " + at)))

		deleteCluster("bare-conf")
		clusterGone("bare-conf")
	})
})
