package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestMessagesSayWhatIsTrue: the namespace kept for lacking OCM's label
// says so in plan and history, not that keepNamespace is true; the plan of
// a live cluster, paused or not, marks no step done, as text, JSON or YAML; a dry run with nothing
// monitored says nothing of monitored objects; release says which clusters
// it looked at only when some were named.
func TestMessagesSayWhatIsTrue(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	env, c := hubWithAdminOperator(ctx, t)
	g.Expect(applyFile(ctx, c, filepath.Join("testdata", "messages.yaml"))).To(Succeed())
	// The paused cluster gets nothing: the operator writes nothing for it.
	for _, name := range []string{"bare", "dry"} {
		g.Eventually(func(g Gomega) {
			mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: name})
			g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}

	// The namespace lacks OCM's label: that is why it is kept.
	why := "namespace bare does not carry OCM's label open-cluster-management.io/cluster-name=bare"
	out, err := kubectlCleanup(t, env.Kubeconfig, "plan", "bare")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("namespace bare: keep (" + why))
	g.Expect(out).NotTo(ContainSubstring("keepNamespace"))
	expectNoStepDone(t, g, env.Kubeconfig, "bare")
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "bare"))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "bare"}, unstructuredObject(managedClusterGVK, "", "bare")))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	out, err = kubectlCleanup(t, env.Kubeconfig, "history", "bare")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`namespace\s+kept\s+\S+\s+namespaces/bare\s+` + why))
	g.Expect(out).NotTo(ContainSubstring("keepNamespace"))

	// A live cluster has no step behind it, paused or not.
	out, err = kubectlCleanup(t, env.Kubeconfig, "plan", "paused")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Suspended: paused by the annotation " + v1alpha1.PausedAnnotation))
	g.Expect(out).To(ContainSubstring("If the cluster is deleted now:"))
	g.Expect(out).NotTo(ContainSubstring("(done)"))
	expectNoStepDone(t, g, env.Kubeconfig, "paused")

	// A dry run with nothing monitored there says nothing of monitored
	// objects, and no empty list.
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "dry"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "dry"})
		cond := findCondition(mc, v1alpha1.ContentDeleteSuccessCondition)
		g.Expect(cond).To(HaveKeyWithValue("reason", v1alpha1.DryRunReason))
		g.Expect(cond["message"]).To(ContainSubstring("would delete namespace dry"))
		g.Expect(cond["message"]).NotTo(ContainSubstring("monitored"))
		g.Expect(cond["message"]).NotTo(MatchRegexp(`: *(;|$)`))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Nothing held: release names the clusters it looked at only when
	// some were named.
	out, err = kubectlCleanup(t, env.Kubeconfig, "release", "--policy", "messages")
	g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
	g.Expect(out).To(ContainSubstring("nothing released: CleanupPolicy messages's blast radius holds no teardown"))
	g.Expect(out).NotTo(ContainSubstring("named"))
	out, err = kubectlCleanup(t, env.Kubeconfig, "release", "--policy", "messages", "--clusters", "paused")
	g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
	g.Expect(out).To(ContainSubstring("ManagedCluster paused: not held by the blast radius of CleanupPolicy messages"))
	g.Expect(out).To(ContainSubstring("holds no teardown of the cluster named: paused"))
}

// expectNoStepDone reads the plan of a live cluster as JSON and as YAML:
// no teardown is behind it, so its first step is next and none is done.
func expectNoStepDone(t *testing.T, g Gomega, kubeconfig, cluster string) {
	t.Helper()
	for _, format := range []string{"json", "yaml"} {
		out, err := kubectlCleanup(t, kubeconfig, "plan", cluster, "-o", format)
		g.Expect(err).NotTo(HaveOccurred(), out)
		var plan decision.Plan
		g.Expect(yaml.Unmarshal([]byte(out), &plan)).To(Succeed(), out)
		g.Expect(plan.Deleting).To(BeFalse())
		g.Expect(plan.Steps).NotTo(BeEmpty(), out)
		for i, st := range plan.Steps {
			g.Expect(st.State).NotTo(Equal(decision.StateDone), "plan %s -o %s: step %d (%s) of a live cluster is done:\n%s",
				cluster, format, i+1, st.Kind, out)
		}
		g.Expect(plan.Steps[0].State).To(Equal(decision.StateNext), out)
	}
}
