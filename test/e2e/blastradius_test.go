package e2e

import (
	"os/exec"
	"path/filepath"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"
)

// The blast radius's names, as the API contract states them.
const blastRadiusExceeded = "BlastRadiusExceeded"

// Scenario 13: a policy whose blast radius allows no teardown holds the
// deleted cluster before its first write: the work agent keeps its
// workloads on the managed cluster, whatever the timeout; released with
// kubectl cleanup release, the cleanup goes as usual.
func scenarioBlastRadius() {
	joinCluster(map[string]string{scenarioLabel: "13"})
	cleanupPolicy(policyYAML("s13", "13", `
removeStrategy:
  default: BestEffort
  timeout: 3s
blastRadius:
  maxTeardowns: 0
deletionSignal:
  manifests:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: s13-alive
      namespace: `+workloadNamespace+`
`))
	governedBy("s13")
	a := manifestWork("13", "s13-app", nil, nil)
	deleteCluster()
	Eventually(func(g Gomega) {
		c := contentDelete(g)
		g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(c.Reason).To(Equal(blastRadiusExceeded))
		g.Expect(c.Message).To(ContainSubstring("CleanupPolicy s13 (maxTeardowns 0 within 1h0m0s)"))
	}).Should(Succeed())
	Eventually(clusterEvents).Should(ContainElement(blastRadiusExceeded))
	// Past the 3s timeout: BestEffort would have forced by now.
	Consistently(func(g Gomega) {
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
