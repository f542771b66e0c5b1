package e2e

import (
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The blast radius's names, as the API contract states them.
const blastRadiusExceeded = "BlastRadiusExceeded"

// agentless are the clusters scenario 13 deletes with cluster1. Their names
// sort before cluster1's: one deletecollection deletes by name, so they are
// deleted first and are the ones the budget lets go.
var agentless = []string{"cluster0-a", "cluster0-b"}

// Scenario 13: a burst of deletions past the policy's blast radius. Three
// governed clusters go in one deletecollection under maxTeardowns 2: the
// two agentless ones are torn down, and cluster1 is held before its first
// write, so the work agent keeps its workloads on the managed cluster,
// whatever the timeout; released with kubectl cleanup release, the cleanup
// goes as usual.
func scenarioBlastRadius() {
	labels := map[string]string{scenarioLabel: "13"}
	joinCluster(labels)
	joinAgentless(labels)
	cleanupPolicy(policyYAML("s13", "13", `
removeStrategy:
  default: BestEffort
  timeout: 3s
blastRadius:
  maxTeardowns: 2
deletionSignal:
  manifests:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: s13-alive
      namespace: `+workloadNamespace+`
`))
	governedBy("s13")
	for _, name := range agentless {
		governedNamed(name, "s13")
	}
	a := manifestWork("13", "s13-app", nil, nil)

	Expect(k8s.DeleteAllOf(ctx, &clusterv1.ManagedCluster{}, client.MatchingLabels(labels))).To(Succeed())
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(c.Reason).To(Equal(blastRadiusExceeded))
		g.Expect(c.Message).To(ContainSubstring("CleanupPolicy s13 (maxTeardowns 2 within 1h0m0s)"))
		g.Expect(c.Message).To(ContainSubstring("3 teardown(s) of its clusters counted within the window: cluster0-a, cluster0-b, cluster1"))
	}).Should(Succeed())
	Eventually(clusterEvents).Should(ContainElement(blastRadiusExceeded))
	for _, name := range agentless {
		Eventually(func() bool { return gone(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}) }).
			Should(BeTrue(), "the budget let %s go, and its teardown did not end", name)
		Eventually(func() bool { return gone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}) }).
			Should(BeTrue(), "the namespace of %s is still there", name)
	}
	// Past the 3s timeout: BestEffort would have forced by now.
	Consistently(func(g Gomega) {
		g.Expect(contentDelete(g).Reason).To(Equal(blastRadiusExceeded))
		g.Expect(deleting(a.work)).To(BeFalse(), "a work was deleted while the blast radius held the cleanup")
		var sig workv1.ManifestWork
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: clusterName, Name: "cleanup-signal"}, &sig)).To(Succeed())
		g.Expect(sig.DeletionTimestamp).To(BeNil(), "the signal was sent while the blast radius held the cleanup")
		g.Expect(workDeleteOption(g, a.work)).To(BeNil(), "a work was stamped while the blast radius held the cleanup")
	}, "5s").Should(Succeed())
	Expect(a.onCluster()).To(Equal([]string{"ConfigMap", "Deployment"}), "the held cluster's workloads left the managed cluster")

	cmd := exec.Command(filepath.Join(paths.bin, "kubectl-cleanup"), "--kubeconfig", adminKubeconfig, "release", "--policy", "s13")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	Expect(string(out)).To(ContainSubstring("ManagedCluster " + clusterName + ": teardown released"))
	hubClean()
	Expect(a.onCluster()).To(BeEmpty(), "the agent did not delete the work's objects: were they forced?")
}

// joinAgentless makes the agentless clusters: accepted by the hub, which
// makes each one's namespace (labelled with the cluster's name) as for any
// cluster, but with no agent, so never Available. What a failed scenario
// leaves of them goes after it.
func joinAgentless(labels map[string]string) {
	GinkgoHelper()
	for _, name := range agentless {
		mc := &clusterv1.ManagedCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true, LeaseDurationSeconds: 1},
		}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		DeferCleanup(func() {
			removeGone(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}})
			removeGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
		Eventually(func(g Gomega) {
			ns := &corev1.Namespace{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabelKey, name))
		}).Should(Succeed(), "the hub made no namespace for %s", name)
	}
}

// governedNamed waits until the operator governs the named cluster with the
// policy: its finalizer and annotation on the cluster, and its mark on the
// cluster's namespace, which holds OCM's gc before any deletion.
func governedNamed(name, policy string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		mc := &clusterv1.ManagedCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, mc)).To(Succeed())
		g.Expect(mc.Finalizers).To(ContainElement(clusterCleanupFinalizer))
		g.Expect(mc.Annotations).To(HaveKeyWithValue(governingPolicyAnnotation, policy))
		ns := &corev1.Namespace{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
		g.Expect(ns.Labels).To(HaveKeyWithValue(governedLabel, "true"), "namespace %s is not marked governed", name)
		g.Expect(ns.Annotations).To(HaveKeyWithValue(governingPolicyAnnotation, policy))
	}).Should(Succeed(), "%s is not governed by %s", name, policy)
}
