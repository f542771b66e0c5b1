package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/review"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// runPlugin runs the plugin as main does, and returns its standard output,
// its standard error and its exit status.
func runPlugin(kubeconfig string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	cmd, o := newRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), exitCode(err, o.ran)
}

// diffOf parses diff's -o json.
func diffOf(g Gomega, out string) *review.Report {
	r := &review.Report{}
	g.Expect(json.Unmarshal([]byte(out), r)).To(Succeed(), out)
	g.Expect(r.APIVersion).To(Equal(review.ReportAPIVersion))
	g.Expect(r.Kind).To(Equal(review.ReportKind))
	return r
}

func clusterOf(r *review.Report, name string) *review.ClusterDiff {
	for i := range r.Clusters {
		if r.Clusters[i].Cluster == name {
			return &r.Clusters[i]
		}
	}
	return nil
}

// TestDiff proposes changes of the one policy of a live hub (an API
// server, no operator) and checks what diff says of each cluster, its exit
// status, and that a snapshot gives offline the output diff gives live.
func TestDiff(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The operator serves the admission webhook the dry runs call.
	env, c := hubWithAdminOperator(ctx, t)
	g.Expect(testenv.CreateFromFile(ctx, c, filepath.Join("testdata", "diff", "hub.yaml"))).To(Succeed())
	dir := func(name string) string { return filepath.Join("testdata", "diff", name) }
	// The operator has stamped c1's work with its orphaning decision: the
	// hub no longer changes under the comparisons.
	g.Eventually(func(g Gomega) {
		w := &unstructured.Unstructured{}
		w.SetGroupVersionKind(manifestWorkGVK)
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "c1", Name: "app"}, w)).To(Succeed())
		p, _, _ := unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy")
		g.Expect(p).To(Equal("SelectivelyOrphan"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	t.Run("a widened selector governs a cluster it did not", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("widen"), "-o", "json")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		g.Expect(errOut).To(ContainSubstring("ConfigMap unrelated ignored"))
		r := diffOf(g, out)
		g.Expect(r.Policies).To(ConsistOf(review.PolicyChange{Name: "prod", Change: "changed"}))
		g.Expect(r.Clusters).To(HaveLen(1))
		c2 := clusterOf(r, "c2")
		g.Expect(c2).NotTo(BeNil())
		g.Expect(c2.Today.Policy).To(BeEmpty())
		g.Expect(c2.Today.Delete).To(BeEmpty())
		g.Expect(c2.After.Policy).To(Equal("prod"))
		g.Expect(c2.After.Strategy).To(Equal("Required"))
		g.Expect(c2.After.Delete).To(ContainElements(
			"manifestworks.work.open-cluster-management.io c2/app", "namespaces c2"))
		g.Expect(c2.Changes).To(ContainElements("governance", "strategy", "delete"))
		g.Expect(r.Unchanged).To(Equal(2))
	})

	t.Run("a narrowed selector loses a cluster and its protection", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("narrow"), "-o", "json")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		r := diffOf(g, out)
		g.Expect(r.Clusters).To(HaveLen(1))
		c3 := clusterOf(r, "c3")
		g.Expect(c3).NotTo(BeNil())
		g.Expect(c3.Today.Policy).To(Equal("prod"))
		g.Expect(c3.Today.Protected).To(BeTrue())
		g.Expect(c3.Today.Delete).To(ContainElement("manifestworks.work.open-cluster-management.io c3/app"))
		g.Expect(c3.After.Policy).To(BeEmpty())
		g.Expect(c3.After.Protected).To(BeFalse())
		g.Expect(c3.After.Delete).To(BeEmpty())
		g.Expect(c3.Changes).To(ContainElements("governance", "protection", "delete"))
	})

	t.Run("a strategy change, in text", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("strategy"))
		g.Expect(code).To(Equal(exitDiffers), errOut)
		g.Expect(errOut).To(BeEmpty())
		g.Expect(out).To(ContainSubstring("ManagedCluster c1\n  strategy: Required -> BestEffort\n"))
		g.Expect(out).To(ContainSubstring("ManagedCluster c3\n  strategy: Required -> BestEffort\n"))
		g.Expect(out).NotTo(ContainSubstring("ManagedCluster c2"))
		g.Expect(out).To(ContainSubstring("2 cluster(s) change, 1 unchanged."))
	})

	t.Run("the live policy again changes nothing", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("identical"), "-o", "yaml")
		g.Expect(code).To(Equal(exitOK), out+errOut)
		g.Expect(out).To(ContainSubstring("change: unchanged"))
		g.Expect(out).To(ContainSubstring("unchanged: 3"))
	})

	t.Run("an invalid policy is refused, its field named", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("invalid"))
		g.Expect(code).To(Equal(exitInvalid), out+errOut)
		g.Expect(code).To(BeNumerically(">", 1))
		g.Expect(errOut).To(ContainSubstring("spec.clusterSelector"))
		g.Expect(out).To(BeEmpty())
	})

	t.Run("with --prune the live policies the files leave out are deleted", func(t *testing.T) {
		g := NewWithT(t)
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("prune"), "--prune", "-o", "json")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		r := diffOf(g, out)
		g.Expect(r.Policies).To(ConsistOf(review.PolicyChange{Name: "edge", Change: "added"}, review.PolicyChange{Name: "prod", Change: "deleted"}))
		g.Expect(clusterOf(r, "c1").After.Policy).To(BeEmpty())
		g.Expect(clusterOf(r, "c3").After.Policy).To(Equal("edge"))
		g.Expect(clusterOf(r, "c3").After.Strategy).To(Equal("BestEffort"))
		g.Expect(clusterOf(r, "c2")).To(BeNil())
		// Without --prune, prod stays and governs c1; c3 goes to edge,
		// first by name of the two of equal priority that select it.
		out, errOut, code = runPlugin(env.Kubeconfig, "diff", "-f", dir("prune"), "-o", "json")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		r = diffOf(g, out)
		g.Expect(r.Policies).To(ConsistOf(review.PolicyChange{Name: "edge", Change: "added"}))
		g.Expect(r.Clusters).To(HaveLen(1))
		g.Expect(clusterOf(r, "c3").Today.Policy).To(Equal("prod"))
		g.Expect(clusterOf(r, "c3").After.Policy).To(Equal("edge"))
	})

	t.Run("the read-only ClusterRole of the docs is enough", func(t *testing.T) {
		g := NewWithT(t)
		role := readerRole(g)
		g.Expect(c.Create(ctx, role)).To(Succeed())
		g.Expect(c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "reviewer"}}})).To(Succeed())
		admin, _, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("widen"))
		g.Expect(code).To(Equal(exitDiffers))
		g.Eventually(func(g Gomega) {
			out, errOut, code := runPlugin(env.Kubeconfig, "--as", "reviewer", "diff", "-f", dir("widen"))
			g.Expect(code).To(Equal(exitDiffers), errOut)
			g.Expect(errOut).To(ContainSubstring("the API server's validation of CleanupPolicy prod was skipped"))
			g.Expect(out).To(Equal(admin))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// The operator's compile still names the field.
		_, errOut, code := runPlugin(env.Kubeconfig, "--as", "reviewer", "diff", "-f", dir("invalid"))
		g.Expect(code).To(Equal(exitInvalid), errOut)
		g.Expect(errOut).To(ContainSubstring("spec.clusterSelector"))
	})

	t.Run("a stage outside the cluster namespace names each cluster's own objects there", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "routes"}})).To(Succeed())
		for _, cluster := range []string{"c1", "c3"} {
			g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "routes", Name: cluster + "-route",
				Labels: map[string]string{"apps.open-cluster-management.io/cluster-name": cluster}}})).To(Succeed())
		}
		out, errOut, code := runPlugin(env.Kubeconfig, "diff", "-f", dir("outside"), "-o", "json")
		g.Expect(code).To(Equal(exitDiffers), errOut)
		r := diffOf(g, out)
		g.Expect(r.Clusters).To(HaveLen(2))
		for own, other := range map[string]string{"c1": "c3", "c3": "c1"} {
			cd := clusterOf(r, own)
			g.Expect(cd).NotTo(BeNil(), own)
			g.Expect(cd.Today.Delete).NotTo(ContainElement(ContainSubstring("route")), own)
			g.Expect(cd.After.Delete).To(ContainElement("configmaps routes/"+own+"-route"), own)
			g.Expect(cd.After.Delete).NotTo(ContainElement(ContainSubstring(other+"-route")), own)
			g.Expect(cd.Changes).To(Equal([]string{"delete"}), own)
		}
		out, errOut, code = runPlugin(env.Kubeconfig, "diff", "-f", dir("outside"))
		g.Expect(code).To(Equal(exitDiffers), errOut)
		g.Expect(out).To(ContainSubstring("ManagedCluster c1\n  a deletion would delete:\n    + configmaps routes/c1-route\n"))
		g.Expect(out).To(ContainSubstring("ManagedCluster c3\n  a deletion would delete:\n    + configmaps routes/c3-route\n"))
		g.Expect(strings.Count(out, "-route")).To(Equal(2), out)
	})

	t.Run("a snapshot answers offline as the hub does live", func(t *testing.T) {
		g := NewWithT(t)
		hub, errOut, code := runPlugin(env.Kubeconfig, "snapshot")
		g.Expect(code).To(Equal(exitOK), errOut)
		g.Expect(hub).NotTo(ContainSubstring("never-in-a-snapshot"))
		g.Expect(hub).NotTo(ContainSubstring(`"kind": "Secret",` + "\n      \"metadata\": {\n        \"name\": \"token\""))
		file := filepath.Join(t.TempDir(), "hub.json")
		g.Expect(os.WriteFile(file, []byte(hub), 0o600)).To(Succeed())
		for _, change := range []string{"widen", "narrow", "strategy", "identical", "prune"} {
			live, _, liveCode := runPlugin(env.Kubeconfig, "diff", "-f", dir(change))
			// No API server: the kubeconfig names none that answers.
			offline, errOut, offlineCode := runPlugin(filepath.Join(t.TempDir(), "none"), "diff", "-f", dir(change), "--snapshot", file)
			g.Expect(offlineCode).To(Equal(liveCode), change+": "+errOut)
			g.Expect(offline).To(Equal(live), change)
		}
	})
}

// readerRole is the ClusterRole docs/policies/review.md gives a
// pull-request check with read-only access to the hub.
func readerRole(g Gomega) *rbacv1.ClusterRole {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "policies", "review.md"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		role := &rbacv1.ClusterRole{}
		if yaml.Unmarshal([]byte(block), role) == nil && role.Kind == "ClusterRole" {
			return role
		}
	}
	g.Expect("a ClusterRole").To(BeEmpty(), "docs/policies/review.md shows no ClusterRole")
	return nil
}
