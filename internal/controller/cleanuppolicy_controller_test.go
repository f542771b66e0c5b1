package controller_test

import (
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

func managedCluster(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("cluster.open-cluster-management.io/v1")
	u.SetKind("ManagedCluster")
	u.SetName(name)
	u.SetLabels(labels)
	Expect(unstructured.SetNestedField(u.Object, true, "spec", "hubAcceptsClient")).To(Succeed())
	return u
}

func cleanupPolicy(name string, spec v1alpha1.CleanupPolicySpec) *v1alpha1.CleanupPolicy {
	if spec.RemoveStrategy.Default == "" {
		spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyRequired
	}
	return &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func getClusterNow(name string) *unstructured.Unstructured {
	mc := managedCluster("", nil)
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, mc)).To(Succeed())
	return mc
}

// status fetches a policy once its status describes its latest generation.
func status(name string) func(g Gomega) *v1alpha1.CleanupPolicy {
	return func(g Gomega) *v1alpha1.CleanupPolicy {
		p := &v1alpha1.CleanupPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation), "status is not of the latest generation")
		return p
	}
}

func condition(p *v1alpha1.CleanupPolicy, typ string) *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, typ)
}

// deleteAll removes the policies, then the clusters, which the operator
// releases once no policy governs them.
func deleteAll() {
	Expect(k8s.DeleteAllOf(ctx, &v1alpha1.CleanupPolicy{})).To(Succeed())
	// A policy stays while a teardown it governs runs; a spec that failed
	// half-way may leave one. Let it go by hand, so that the next spec
	// starts clean.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var policies v1alpha1.CleanupPolicyList
		Expect(k8s.List(ctx, &policies)).To(Succeed())
		if len(policies.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			GinkgoWriter.Printf("teardowns still running at the end of the spec: removing the operator's finalizers by hand\n")
			clusters := &unstructured.UnstructuredList{}
			clusters.SetAPIVersion("cluster.open-cluster-management.io/v1")
			clusters.SetKind("ManagedClusterList")
			Expect(k8s.List(ctx, clusters)).To(Succeed())
			for i := range clusters.Items {
				if clusters.Items[i].GetDeletionTimestamp() != nil {
					removeFinalizerByHand(&clusters.Items[i], v1alpha1.ClusterCleanupFinalizer)
				}
			}
			for i := range policies.Items {
				removeFinalizerByHand(&policies.Items[i], v1alpha1.InUseFinalizer)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	Eventually(func(g Gomega) {
		var policies v1alpha1.CleanupPolicyList
		g.Expect(k8s.List(ctx, &policies)).To(Succeed())
		g.Expect(policies.Items).To(BeEmpty())
	}).Should(Succeed())
	// ConfigurationPolicies too, wherever they are: a standalone one left
	// behind would be governed, and counted, by the next spec's policy.
	cps := &unstructured.UnstructuredList{}
	cps.SetAPIVersion("policy.open-cluster-management.io/v1")
	cps.SetKind("ConfigurationPolicyList")
	Expect(k8s.List(ctx, cps)).To(Succeed())
	for i := range cps.Items {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &cps.Items[i]))).To(Succeed())
	}
	unprotectAll()
	Expect(k8s.DeleteAllOf(ctx, managedCluster("", nil))).To(Succeed())
	Eventually(func(g Gomega) {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("cluster.open-cluster-management.io/v1")
		list.SetKind("ManagedClusterList")
		g.Expect(k8s.List(ctx, list)).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}).Should(Succeed())
}

var _ = Describe("CleanupPolicy", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("compiles a valid policy, reports Ready and counts the clusters it matches and governs", func() {
		for i, env := range []string{"prod", "prod", "dev"} {
			Expect(k8s.Create(ctx, managedCluster(fmt.Sprintf("ready-%d", i), map[string]string{"env": env}))).To(Succeed())
		}
		Expect(k8s.Create(ctx, cleanupPolicy("prod", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
		}))).To(Succeed())

		Eventually(func(g Gomega) {
			p := status("prod")(g)
			ready := condition(p, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(ready.Reason).To(Equal(v1alpha1.SucceededReason))
			g.Expect(ready.ObservedGeneration).To(Equal(p.Generation))
			g.Expect(condition(p, v1alpha1.StalledCondition)).To(BeNil())
			g.Expect(condition(p, v1alpha1.ReconcilingCondition)).To(BeNil())
			g.Expect(p.Status.MatchedClusters).To(BeEquivalentTo(2))
			g.Expect(p.Status.GovernedClusters).To(BeEquivalentTo(2))
		}).Should(Succeed())

		By("following a label change on a cluster")
		c := managedCluster("", nil)
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "ready-2"}, c)).To(Succeed())
		c.SetLabels(map[string]string{"env": "prod"})
		Expect(k8s.Update(ctx, c)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(status("prod")(g).Status.MatchedClusters).To(BeEquivalentTo(3))
		}).Should(Succeed())
	})

	It("counts a deleting cluster under the policy that started its teardown, not under the one its selectors now choose", func() {
		fleetCluster("pin-1", map[string]string{"env": "old"}, true)
		app := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "pin-1", Labels: map[string]string{"app": "shop"}}}
		Expect(k8s.Create(ctx, app)).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("pin-old", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'old'",
			MonitoredResources: []v1alpha1.MonitoredResource{{
				GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				When:                 "object.metadata.labels[?'app'].hasValue()",
			}},
		}))).To(Succeed())
		governedBy("pin-1", "pin-old")
		deleteCluster("pin-1")
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "pin-1").Reason).To(Equal(v1alpha1.WaitingForMonitoredResourcesReason))
		}).Should(Succeed())

		By("a policy of higher priority selecting the cluster mid-teardown")
		Expect(k8s.Create(ctx, cleanupPolicy("pin-new", v1alpha1.CleanupPolicySpec{Priority: 100}))).To(Succeed())
		Eventually(func(g Gomega) {
			p := status("pin-new")(g)
			g.Expect(condition(p, v1alpha1.ReadyCondition)).NotTo(BeNil())
			g.Expect(p.Status.MatchedClusters).To(BeEquivalentTo(1))
			g.Expect(p.Status.GovernedClusters).To(BeZero(), "the teardown stays with pin-old")
			g.Expect(p.Status.ClustersDeleting).To(BeZero())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			p := status("pin-old")(g)
			g.Expect(p.Status.MatchedClusters).To(BeEquivalentTo(1))
			g.Expect(p.Status.GovernedClusters).To(BeEquivalentTo(1))
			g.Expect(p.Status.ClustersDeleting).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Expect(getClusterNow("pin-1").GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "pin-old"))

		Expect(k8s.Delete(ctx, app)).To(Succeed())
		clusterGone("pin-1")
	})

	It("compiles once per generation, however many clusters and reconciles", func() {
		for i := range 20 {
			Expect(k8s.Create(ctx, managedCluster(fmt.Sprintf("gen-%d", i), map[string]string{"env": "prod"}))).To(Succeed())
		}
		compilations := op.Cache.Compilations()
		p := cleanupPolicy("gen", v1alpha1.CleanupPolicySpec{ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'"})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(status("gen")(g).Status.MatchedClusters).To(BeEquivalentTo(20))
		}).Should(Succeed())
		Expect(op.Cache.Compilations() - compilations).To(BeEquivalentTo(1))

		By("recompiling when the spec changes")
		before := p.DeepCopy()
		p.Spec.ClusterSelector = "cluster.metadata.name.endsWith('-1')"
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(status("gen")(g).Status.MatchedClusters).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Expect(op.Cache.Compilations() - compilations).To(BeEquivalentTo(2))
	})

	It("holds the clusters where the selector fails at run time, reports them, and recovers", func() {
		Expect(k8s.Create(ctx, managedCluster("rt-labelled", map[string]string{"env": "prod"}))).To(Succeed())
		Expect(k8s.Create(ctx, managedCluster("rt-bare", nil))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("strict", v1alpha1.CleanupPolicySpec{
			// labels['env'] is an error where the label is missing: the
			// cluster is held, not taken as unmatched.
			ClusterSelector: "cluster.metadata.labels['env'] == 'prod'",
		}))).To(Succeed())

		Eventually(func(g Gomega) {
			p := status("strict")(g)
			ready := condition(p, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.EvaluationErrorReason))
			g.Expect(ready.Message).To(ContainSubstring("rt-bare: spec.clusterSelector: no such key: env"))
			g.Expect(condition(p, v1alpha1.StalledCondition)).NotTo(BeNil())
			g.Expect(p.Status.EvaluationErrors).To(BeEquivalentTo(1))
			g.Expect(p.Status.MatchedClusters).To(BeEquivalentTo(1))
		}).Should(Succeed())

		By("recovering once the cluster carries the label")
		c := managedCluster("", nil)
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "rt-bare"}, c)).To(Succeed())
		c.SetLabels(map[string]string{"env": "dev"})
		Expect(k8s.Update(ctx, c)).To(Succeed())
		Eventually(func(g Gomega) {
			p := status("strict")(g)
			g.Expect(condition(p, v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(p, v1alpha1.StalledCondition)).To(BeNil())
			g.Expect(p.Status.EvaluationErrors).To(BeZero())
		}).Should(Succeed())
	})

	It("lets a selector govern before a catch-all of its priority whatever their names, and reports a tie between two selectors on both", func() {
		for _, name := range []string{"ov-a", "ov-b"} {
			Expect(k8s.Create(ctx, managedCluster(name, map[string]string{"env": "prod"}))).To(Succeed())
		}
		Expect(k8s.Create(ctx, managedCluster("ov-c", map[string]string{"env": "dev"}))).To(Succeed())
		// The catch-all's name sorts first.
		Expect(k8s.Create(ctx, cleanupPolicy("aaa-default", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		prod := "cluster.metadata.labels[?'env'].orValue('') == 'prod'"
		Expect(k8s.Create(ctx, cleanupPolicy("gamma", v1alpha1.CleanupPolicySpec{ClusterSelector: prod}))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("alpha", v1alpha1.CleanupPolicySpec{ClusterSelector: prod}))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("urgent", v1alpha1.CleanupPolicySpec{
			Priority: 10, ClusterSelector: "cluster.metadata.name == 'ov-a'",
		}))).To(Succeed())

		Eventually(func(g Gomega) {
			alpha := status("alpha")(g)
			g.Expect(alpha.Status.MatchedClusters).To(BeEquivalentTo(2))
			g.Expect(alpha.Status.GovernedClusters).To(BeEquivalentTo(1), "ov-a is governed by the higher priority")
			g.Expect(alpha.Status.Overlaps).To(ConsistOf(v1alpha1.PolicyOverlap{
				Policy: "gamma", Clusters: 2, GovernedBy: "alpha", Examples: []string{"ov-a", "ov-b"},
			}))
			g.Expect(condition(alpha, v1alpha1.ReadyCondition).Message).To(ContainSubstring(
				"ties with CleanupPolicy gamma (the same priority) on 2 cluster(s), which alpha governs by its lower name: give one a higher priority"))
			gamma := status("gamma")(g)
			g.Expect(gamma.Status.GovernedClusters).To(BeZero())
			g.Expect(gamma.Status.Overlaps).To(HaveLen(1))
			g.Expect(gamma.Status.Overlaps[0].GovernedBy).To(Equal("alpha"))
			g.Expect(condition(gamma, v1alpha1.ReadyCondition).Message).To(ContainSubstring("ties with CleanupPolicy alpha"))
			catchAll := status("aaa-default")(g)
			g.Expect(catchAll.Status.MatchedClusters).To(BeEquivalentTo(3))
			g.Expect(catchAll.Status.GovernedClusters).To(BeEquivalentTo(1), "only ov-c is left to the catch-all")
			g.Expect(catchAll.Status.Overlaps).To(BeEmpty(), "a selector outranks a catch-all of its priority: no tie")
			urgent := status("urgent")(g)
			g.Expect(urgent.Status.GovernedClusters).To(BeEquivalentTo(1))
			g.Expect(urgent.Status.Overlaps).To(BeEmpty(), "a higher priority is not an overlap")
		}).Should(Succeed())
		Eventually(func() []string { return events("gamma") }).Should(ContainElement(HavePrefix("Overlap: ")))

		By("clearing the tie when the other policy goes away")
		Expect(k8s.Delete(ctx, cleanupPolicy("gamma", v1alpha1.CleanupPolicySpec{}))).To(Succeed())
		Eventually(func(g Gomega) {
			alpha := status("alpha")(g)
			g.Expect(alpha.Status.Overlaps).To(BeEmpty())
			g.Expect(condition(alpha, v1alpha1.ReadyCondition).Message).NotTo(ContainSubstring("ties with"))
		}).Should(Succeed())
	})

	It("refuses an invalid policy at admission, naming the field", func() {
		err := k8s.Create(ctx, cleanupPolicy("bad", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "ok", When: "true"}, {Name: "typo", When: "manfest.kind == 'ConfigMap'"}},
		}))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.orphaning[1].when"))
		Expect(err.Error()).To(ContainSubstring("undeclared reference to 'manfest'"))

		err = k8s.Create(ctx, cleanupPolicy("bad", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.lables['env'] == 'prod'",
		}))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.clusterSelector"))
		Expect(err.Error()).To(ContainSubstring("undefined field 'lables'"))

		By("refusing an update that breaks a valid policy")
		p := cleanupPolicy("good", v1alpha1.CleanupPolicySpec{})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.KeepNamespace = "namespace.metadata.name"
		err = k8s.Patch(ctx, p, client.MergeFrom(before))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.keepNamespace"))
		Expect(err.Error()).To(ContainSubstring("must evaluate to bool, but evaluates to string"))
	})

	It("refuses the invalid policies of test/testdata/invalid at kubectl apply --dry-run=server with the field path", func() {
		invalid := map[string][]string{
			"misspelled-field.yaml":    {"spec.clusterSelector", "undefined field 'lables'"},
			"unbound-variable.yaml":    {"spec.orphaning[1].when", "undeclared reference to 'manfest'"},
			"unknown-strategy.yaml":    {"spec.removeStrategy.default", "Unsupported value: \"Sometimes\""},
			"duplicate-stage.yaml":     {"spec.deletionStages[1]", "Duplicate value"},
			"empty-resource.yaml":      {"spec.monitoredResources[0].resource", "should be at least 1"},
			"protection-not-bool.yaml": {"spec.deletionProtection", "must evaluate to bool, but evaluates to string"},
			"protection-unbound.yaml":  {"spec.deletionProtection", "undeclared reference to 'namespace'"},
		}
		for file, want := range invalid {
			out, err := kubectlDryRun(filepath.Join(testenv.RepoRoot(), "test", "testdata", "invalid", file))
			Expect(err).To(HaveOccurred(), "%s was accepted: %s", file, out)
			for _, w := range want {
				Expect(out).To(ContainSubstring(w), file)
			}
		}
		// Nothing was created by the dry runs.
		var list v1alpha1.CleanupPolicyList
		Expect(k8s.List(ctx, &list)).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	Context("when a broken policy reaches the API server without the webhook", func() {
		BeforeEach(withoutWebhook)

		It("stalls it with InvalidCELExpression and the field path, governs nothing with it, and keeps the manager running", func() {
			Expect(k8s.Create(ctx, managedCluster("held-1", map[string]string{"env": "prod"}))).To(Succeed())
			Eventually(func() error {
				// until the API server has dropped the webhook from its cache
				return k8s.Create(ctx, cleanupPolicy("broken", v1alpha1.CleanupPolicySpec{
					Priority:        100,
					ClusterSelector: "cluster.metadata.lables['env'] == 'prod'",
				}))
			}).Should(Succeed())
			Expect(k8s.Create(ctx, cleanupPolicy("fallback", v1alpha1.CleanupPolicySpec{}))).To(Succeed())

			Eventually(func(g Gomega) {
				p := status("broken")(g)
				ready := condition(p, v1alpha1.ReadyCondition)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Reason).To(Equal(v1alpha1.InvalidCELExpressionReason))
				g.Expect(ready.Message).To(ContainSubstring("spec.clusterSelector"))
				g.Expect(ready.Message).To(ContainSubstring("undefined field 'lables'"))
				stalled := condition(p, v1alpha1.StalledCondition)
				g.Expect(stalled).NotTo(BeNil())
				g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(p.Status.MatchedClusters).To(BeZero())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				p := status("fallback")(g)
				g.Expect(condition(p, v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
				g.Expect(p.Status.GovernedClusters).To(BeEquivalentTo(1), "the broken policy must not win the cluster")
			}).Should(Succeed())

			By("going ready once the expression is fixed")
			p := &v1alpha1.CleanupPolicy{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: "broken"}, p)).To(Succeed())
			before := p.DeepCopy()
			p.Spec.ClusterSelector = "cluster.metadata.labels[?'env'].orValue('') == 'prod'"
			Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
			Eventually(func(g Gomega) {
				p := status("broken")(g)
				g.Expect(condition(p, v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
				g.Expect(condition(p, v1alpha1.StalledCondition)).To(BeNil())
				g.Expect(p.Status.GovernedClusters).To(BeEquivalentTo(1))
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(status("fallback")(g).Status.GovernedClusters).To(BeZero())
			}).Should(Succeed())
		})
	})
})
