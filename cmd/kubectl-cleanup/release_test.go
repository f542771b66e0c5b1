package main

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// TestRelease: with the operator running as its own service account, a
// policy whose blast radius allows no teardown holds both clusters deleted;
// the plan shows the hold; release names what it releases, only the
// clusters asked for, and the operator lets exactly those go. Admission
// refuses the release to a user who may patch ManagedClusters but not
// update cleanuppolicies/release of the policy, and lets the policy's administrator release.
func TestRelease(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	env, c := hubWithOperator(ctx, t)
	zero := intstr.FromInt32(0)
	policy := &v1alpha1.CleanupPolicy{}
	policy.Name = "fleet"
	policy.Spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyRequired
	policy.Spec.BlastRadius = &v1alpha1.BlastRadius{MaxTeardowns: &zero}
	g.Expect(c.Create(ctx, policy)).To(Succeed())
	names := []string{"eu-1", "eu-2", "eu-3"}
	for _, name := range names {
		g.Expect(createCluster(ctx, c, name)).To(Succeed())
	}
	for _, name := range names {
		g.Eventually(func(g Gomega) {
			mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: name})
			g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}

	// Nothing held yet: nothing to release (exit 1).
	out, err := kubectlCleanup(t, env.Kubeconfig, "release", "--policy", "fleet")
	g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
	out, err = kubectlCleanup(t, env.Kubeconfig, "release")
	g.Expect(exitCode(err, true)).To(Equal(exitUsage), out)

	for _, name := range names[:2] {
		g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", name))).To(Succeed())
	}
	for _, name := range names[:2] {
		g.Eventually(func(g Gomega) {
			mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: name})
			g.Expect(heldByBlastRadius(mc)).To(BeTrue())
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	out, err = kubectlCleanup(t, env.Kubeconfig, "plan", "eu-1")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("hold: held by the blast radius of CleanupPolicy fleet (maxTeardowns 0 within 1h0m0s)"))

	out, err = kubectlCleanup(t, env.Kubeconfig, "release", "--policy", "fleet", "--clusters", "nope")
	g.Expect(exitCode(err, true)).To(Equal(exitNotFound), out)

	// Admission lets only whoever may release the policy release: one who
	// may patch ManagedClusters only is refused, naming the right.
	clusters := rbacv1.PolicyRule{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"},
		Verbs: []string{"get", "list", "patch"}}
	patcher := userKubeconfig(ctx, t, g, c, env, "cluster-patcher", "cluster-patcher", []rbacv1.PolicyRule{clusters})
	// The policies are in force once a dry run is refused.
	patcherCfg, err := clientcmd.BuildConfigFromFlags("", patcher)
	g.Expect(err).NotTo(HaveOccurred())
	asPatcher, err := client.New(patcherCfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		return asPatcher.Patch(ctx, unstructuredObject(managedClusterGVK, "", "eu-2"), client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+v1alpha1.BlastRadiusReleasedAnnotation+`":"1/2000-01-01T00:00:00Z"}}}`)), client.DryRunAll)
	}).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("may not update cleanuppolicies/release of CleanupPolicy fleet")))
	out, err = kubectlCleanup(t, patcher, "release", "--policy", "fleet", "--clusters", "eu-1")
	g.Expect(err).To(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`ManagedCluster eu-1: the requesting user may not update cleanuppolicies/release of CleanupPolicy fleet (verb update, group "cleanup.fleetops.dev", resource cleanuppolicies/release)`))
	g.Expect(get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "eu-1"}).GetAnnotations()).NotTo(HaveKey(v1alpha1.BlastRadiusReleasedAnnotation))

	admin := userKubeconfig(ctx, t, g, c, env, "fleet-admin", "fleet-admin", []rbacv1.PolicyRule{clusters,
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"cleanuppolicies/" + admissionpolicy.ReleaseSubresource}, ResourceNames: []string{"fleet"}, Verbs: []string{admissionpolicy.ReleaseVerb}}})
	out, err = kubectlCleanup(t, admin, "release", "--policy", "fleet", "--clusters", "eu-1,eu-3")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(MatchRegexp(`ManagedCluster eu-1: teardown released \(cleanup.fleetops.dev/blast-radius-released=1/\S+\)\.`))
	g.Expect(out).To(ContainSubstring("ManagedCluster eu-3: not held by the blast radius of CleanupPolicy fleet; nothing written."))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "eu-1"}, unstructuredObject(managedClusterGVK, "", "eu-1")))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "eu-1 was not released")
	g.Consistently(func(g Gomega) {
		mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "eu-2"})
		g.Expect(heldByBlastRadius(mc)).To(BeTrue())
		g.Expect(mc.GetAnnotations()).NotTo(HaveKey(v1alpha1.BlastRadiusReleasedAnnotation))
	}).WithTimeout(2 * time.Second).Should(Succeed())

	out, err = kubectlCleanup(t, env.Kubeconfig, "release", "--policy", "fleet", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`"released": [`))
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "eu-2"}, unstructuredObject(managedClusterGVK, "", "eu-2")))
	}).WithTimeout(30*time.Second).Should(BeTrue(), "eu-2 was not released")
}
