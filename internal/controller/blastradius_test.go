package controller_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
)

// burstFleet makes governed clusters, each with one work, and returns the
// generation of each work (a stamp or any spec write changes it).
func burstFleet(policy, label string, b *v1alpha1.BlastRadius, names ...string) map[string]string {
	works := map[string]string{}
	for _, n := range names {
		fleetCluster(n, map[string]string{"burst": label}, true)
		works[n] = fmt.Sprint(work(n, "app", nil).GetGeneration())
	}
	Expect(k8s.Create(ctx, cleanupPolicy(policy, v1alpha1.CleanupPolicySpec{
		ClusterSelector: "cluster.metadata.labels[?'burst'].orValue('') == '" + label + "'",
		BlastRadius:     b,
	}))).To(Succeed())
	for _, n := range names {
		governedBy(n, policy)
	}
	return works
}

// deleteInOneSecond deletes the clusters within one second of the API
// server's clock, the unit it keeps deletion times in. The window moves by
// those times: a cluster deleted a second after the one whose teardown took
// the window's slot would be the first counted once that one left the
// window, and go, as docs/policies/blast-radius.md says.
func deleteInOneSecond(names ...string) {
	second := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(second.Add(20 * time.Millisecond)))
	for _, n := range names {
		deleteCluster(n)
	}
	Expect(time.Now().Truncate(time.Second)).To(Equal(second), "%v were not deleted within one second: the spec needs them to be", names)
}

// heldByBudget waits until the cluster's teardown holds with reason and
// returns the condition's message.
func heldByBudget(name, reason string) string {
	var msg string
	Eventually(func(g Gomega) {
		c := contentDelete(g, name)
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
		msg = c.Message
	}).Should(Succeed())
	return msg
}

// untouched checks that nothing of the cluster's teardown was written: its
// work as it was, not deleting, and its namespace unlabelled.
func untouched(g Gomega, name, workGen string) {
	w := work0(g, name)
	g.Expect(fmt.Sprint(w.GetGeneration())).To(Equal(workGen), "the work of %s was written", name)
	g.Expect(w.GetDeletionTimestamp()).To(BeNil())
	ns := &corev1.Namespace{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
	g.Expect(ns.Labels).NotTo(HaveKey(v1alpha1.ClusterDeletingLabel))
	g.Expect(ns.DeletionTimestamp).To(BeNil())
}

func work0(g Gomega, namespace string) *metav1.PartialObjectMetadata {
	w := &metav1.PartialObjectMetadata{}
	w.SetGroupVersionKind(schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork"})
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "app"}, w)).To(Succeed())
	return w
}

// release writes the release annotation as kubectl cleanup release does.
func release(name string, count int, at time.Time) {
	mc := getClusterNow(name)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d/%s"}}}`, v1alpha1.BlastRadiusReleasedAnnotation, count, at.UTC().Format(time.RFC3339))
	Expect(k8s.Patch(ctx, mc, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

// setBudget changes the policy's blast radius.
func setBudget(policy string, b *v1alpha1.BlastRadius) {
	Eventually(func(g Gomega) {
		p := &v1alpha1.CleanupPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: policy}, p)).To(Succeed())
		p.Spec.BlastRadius = b
		g.Expect(k8s.Update(ctx, p)).To(Succeed())
	}).Should(Succeed())
}

// patchMeta sets a label or annotation (field "labels" or "annotations")
// of a cluster, or removes it when value is empty.
func patchMeta(name, field, key, value string) {
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Sprintf(`{"metadata":{%q:{%q:%s}}}`, field, key, v)
	Expect(k8s.Patch(ctx, getClusterNow(name), client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

// setDryRun turns the policy's dry run on or off.
func setDryRun(policy string, on bool) {
	Eventually(func(g Gomega) {
		p := &v1alpha1.CleanupPolicy{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: policy}, p)).To(Succeed())
		p.Spec.DryRun = on
		g.Expect(k8s.Update(ctx, p)).To(Succeed())
	}).Should(Succeed())
}

func maxTeardowns(n int32) *intstr.IntOrString {
	v := intstr.FromInt32(n)
	return &v
}

var _ = Describe("Blast radius", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(45 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("lets the first maxTeardowns of a burst go and holds the rest untouched, across a restart, until released or the budget is raised", func() {
		names := []string{"br-a", "br-b", "br-c", "br-d", "br-e"}
		works := burstFleet("br-burst", "a", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(2)}, names...)
		// Deleted in order: by deletion time, then name, the first two.
		for _, n := range names {
			deleteCluster(n)
		}
		clusterGone("br-a")
		clusterGone("br-b")
		for _, n := range names[2:] {
			msg := heldByBudget(n, v1alpha1.BlastRadiusExceededReason)
			Expect(msg).To(ContainSubstring("CleanupPolicy br-burst (maxTeardowns 2 within 1h0m0s)"))
			// The clusters counted as of its report, the first two (gone
			// or going) and itself included. Those begun come first: the
			// second's teardown may have begun before the first's.
			Expect(msg).To(MatchRegexp(`\d teardown\(s\) of its clusters counted within the window: (br-a, br-b|br-b, br-a), (br-., )*` + n))
		}
		Consistently(func(g Gomega) {
			for _, n := range names[2:] {
				untouched(g, n, works[n])
			}
		}, "2s").Should(Succeed())
		Expect(strings.Join(events("br-c"), "\n")).To(ContainSubstring("BlastRadiusExceeded: held by the blast radius"))
		Eventually(func() float64 { return testutil.ToFloat64(op.Metrics.BlastRadiusHeld.WithLabelValues("br-burst")) }).Should(BeEquivalentTo(3))

		By("an admin releasing one held teardown")
		release("br-c", 1, time.Now())
		clusterGone("br-c")

		By("restarting the operator: the same clusters stay held")
		stopManager()
		startManager()
		Consistently(func(g Gomega) {
			for _, n := range names[3:] {
				g.Expect(contentDelete(g, n).Reason).To(Equal(v1alpha1.BlastRadiusExceededReason))
				untouched(g, n, works[n])
			}
		}, "3s").Should(Succeed())

		By("raising the budget: the next in line goes")
		setBudget("br-burst", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(4)})
		clusterGone("br-d")
		Consistently(func(g Gomega) { untouched(g, "br-e", works["br-e"]) }, "2s").Should(Succeed())
		Expect(contentDelete(Default, "br-e").Reason).To(Equal(v1alpha1.BlastRadiusExceededReason))
		release("br-e", 1, time.Now())
		clusterGone("br-e")
	})

	It("never holds a begun teardown when the budget is lowered; a release reaches no deletion after it", func() {
		names := []string{"bl-a", "bl-b", "bl-c", "bl-d", "bl-e"}
		works := burstFleet("br-lower", "b", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(2)}, names...)
		agent.setStuck("bl-a", "app", true)
		agent.setStuck("bl-b", "app", true)
		deleteCluster("bl-a")
		deleteCluster("bl-b")
		for _, n := range names[:2] {
			Eventually(func(g Gomega) { g.Expect(contentDelete(g, n).Reason).To(Equal(v1alpha1.ResourcesRemainingReason)) }).Should(Succeed())
		}
		deleteCluster("bl-c")
		heldByBudget("bl-c", v1alpha1.BlastRadiusExceededReason)

		By("lowering the budget to 0: the begun teardowns go on")
		setBudget("br-lower", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(0)})
		Consistently(func(g Gomega) {
			for _, n := range names[:2] {
				g.Expect(contentDelete(g, n).Reason).To(Equal(v1alpha1.ResourcesRemainingReason))
			}
		}, "2s").Should(Succeed())
		agent.setStuck("bl-a", "app", false)
		agent.setStuck("bl-b", "app", false)
		clusterGone("bl-a")
		clusterGone("bl-b")

		By("a release written before a deletion is refused; one racing a new deletion, or dated before it, releases nothing")
		early := fmt.Sprintf(`{"metadata":{"annotations":{%q:"1/%s"}}}`, v1alpha1.BlastRadiusReleasedAnnotation, time.Now().UTC().Format(time.RFC3339))
		Expect(k8s.Patch(ctx, getClusterNow("bl-e"), client.RawPatch("application/merge-patch+json", []byte(early)))).To(
			MatchError(ContainSubstring("is written on a cluster being deleted only")))
		release("bl-c", 1, time.Now())
		deleteCluster("bl-d")
		deleteCluster("bl-e")
		clusterGone("bl-c")
		heldByBudget("bl-d", v1alpha1.BlastRadiusExceededReason)
		heldByBudget("bl-e", v1alpha1.BlastRadiusExceededReason)
		release("bl-e", 1, time.Now().Add(-time.Hour))
		Consistently(func(g Gomega) {
			untouched(g, "bl-d", works["bl-d"])
			untouched(g, "bl-e", works["bl-e"])
		}, "2s").Should(Succeed())
		release("bl-d", 2, time.Now())
		release("bl-e", 2, time.Now())
		clusterGone("bl-d")
		clusterGone("bl-e")
	})

	It("keeps a held teardown held past its window until the policy says to go on; a deletion after the window goes", func() {
		window := &metav1.Duration{Duration: 4 * time.Second}
		works := burstFleet("br-window", "c", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1), Window: window}, "bw-a", "bw-b", "bw-c")
		deleteInOneSecond("bw-a", "bw-b")
		clusterGone("bw-a")
		heldByBudget("bw-b", v1alpha1.BlastRadiusExceededReason)
		// The window passes: still held (afterWindow Hold by default).
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "bw-b").Message).To(ContainSubstring("its window passed and afterWindow is Hold"))
		}).Should(Succeed())
		untouched(Default, "bw-b", works["bw-b"])

		By("a deletion after the window: a new window, it goes")
		deleteCluster("bw-c")
		clusterGone("bw-c")
		Expect(contentDelete(Default, "bw-b").Reason).To(Equal(v1alpha1.BlastRadiusExceededReason))

		By("afterWindow Proceed: the held teardown goes once a window passes with no new deletion")
		setBudget("br-window", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1), Window: window, AfterWindow: v1alpha1.AfterWindowProceed})
		clusterGone("bw-b")
	})

	It("bounds a burst met while the policy held or previewed it: a hold or a dry run before the first write begins nothing", func() {
		// bh-a's tier label lets the policy's strategy rule decide; the
		// others' lack of it is a CEL error, which holds their teardowns
		// before their first write.
		names := []string{"bh-a", "bh-b", "bh-c"}
		works := map[string]string{}
		for _, n := range names {
			labels := map[string]string{"burst": "h"}
			if n == "bh-a" {
				labels["tier"] = "prod"
			}
			fleetCluster(n, labels, true)
			works[n] = fmt.Sprint(work(n, "app", nil).GetGeneration())
		}
		Expect(k8s.Create(ctx, cleanupPolicy("br-early", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'burst'].orValue('') == 'h'",
			BlastRadius:     &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1)},
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired,
				Rules: []v1alpha1.StrategyRule{{When: "cluster.metadata.labels['tier'] == 'prod'", Strategy: v1alpha1.RemoveStrategyRequired}}},
		}))).To(Succeed())
		for _, n := range names {
			governedBy(n, "br-early")
		}
		deleteCluster("bh-a")
		clusterGone("bh-a")
		deleteCluster("bh-b")
		deleteCluster("bh-c")
		for _, n := range names[1:] {
			Eventually(func(g Gomega) {
				c := contentDelete(g, n)
				g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
				g.Expect(c.Status).To(Equal(metav1.ConditionUnknown), "nothing was written: the teardown has not begun")
				g.Expect(c.Message).To(ContainSubstring("no such key"))
			}).Should(Succeed())
		}

		By("the hold ending: the budget, spent on bh-a, holds both")
		for _, n := range names[1:] {
			patchMeta(n, "labels", "tier", "prod")
		}
		for _, n := range names[1:] {
			heldByBudget(n, v1alpha1.BlastRadiusExceededReason)
		}
		Consistently(func(g Gomega) {
			for _, n := range names[1:] {
				untouched(g, n, works[n])
			}
		}, "2s").Should(Succeed())
		release("bh-b", 1, time.Now())
		release("bh-c", 1, time.Now())
		clusterGone("bh-b")
		clusterGone("bh-c")

		By("a burst deleted under a dry run: turned off, the budget lets one go")
		works = burstFleet("br-preview", "v", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1)}, "bv-a", "bv-b")
		setDryRun("br-preview", true)
		deleteCluster("bv-a")
		deleteCluster("bv-b")
		for _, n := range []string{"bv-a", "bv-b"} {
			Eventually(func(g Gomega) {
				c := contentDelete(g, n)
				g.Expect(c.Reason).To(Equal(v1alpha1.DryRunReason))
				g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
			}).Should(Succeed())
		}
		setDryRun("br-preview", false)
		clusterGone("bv-a")
		heldByBudget("bv-b", v1alpha1.BlastRadiusExceededReason)
		Consistently(func(g Gomega) { untouched(g, "bv-b", works["bv-b"]) }, "2s").Should(Succeed())
		release("bv-b", 1, time.Now())
		clusterGone("bv-b")
	})

	It("keeps a teardown its budget held held through hooks, a dry run and a pause, until the policy says to go on", func() {
		window := &metav1.Duration{Duration: 4 * time.Second}
		works := burstFleet("br-sticky", "k", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1), Window: window}, "bk-a", "bk-b", "bk-c")
		// By deletion time, then name, bk-a's is the one teardown the
		// window lets begin.
		deleteInOneSecond("bk-a", "bk-b", "bk-c")
		clusterGone("bk-a")
		// bk-a's teardown began within the window: both are held, and
		// stay held once the window passes.
		for _, n := range []string{"bk-b", "bk-c"} {
			Eventually(func(g Gomega) {
				c := contentDelete(g, n)
				g.Expect(c.Reason).To(Equal(v1alpha1.BlastRadiusExceededReason))
				g.Expect(c.Message).To(ContainSubstring("its window passed and afterWindow is Hold"))
			}).Should(Succeed())
		}
		stillHeld := func(g Gomega) {
			for _, n := range []string{"bk-b", "bk-c"} {
				g.Expect(contentDelete(g, n).Reason).To(Equal(v1alpha1.BlastRadiusExceededReason))
				untouched(g, n, works[n])
			}
		}

		By("a hook added to a held teardown, then removed")
		hook := v1alpha1.PreCleanupHookPrefix + "backup"
		patchMeta("bk-b", "annotations", hook, "velero")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "bk-b")
			g.Expect(c.Reason).To(Equal(v1alpha1.BlastRadiusExceededReason))
			g.Expect(c.Message).To(ContainSubstring(hook))
		}).Should(Succeed())
		patchMeta("bk-b", "annotations", hook, "")
		Consistently(stillHeld, "2s").Should(Succeed())

		By("the policy turned to a dry run, then back")
		setDryRun("br-sticky", true)
		Eventually(func(g Gomega) {
			g.Expect(contentDelete(g, "bk-b").Message).To(ContainSubstring("dry run"))
		}).Should(Succeed())
		Consistently(stillHeld, "1s").Should(Succeed())
		setDryRun("br-sticky", false)
		Consistently(stillHeld, "2s").Should(Succeed())

		By("a held teardown paused, then resumed")
		patchMeta("bk-c", "annotations", v1alpha1.PausedAnnotation, "true")
		Consistently(stillHeld, "1s").Should(Succeed())
		patchMeta("bk-c", "annotations", v1alpha1.PausedAnnotation, "")
		Consistently(stillHeld, "2s").Should(Succeed())

		By("afterWindow Proceed: once a window passes with no new deletion, both go, the resumed one included")
		setBudget("br-sticky", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1), Window: window, AfterWindow: v1alpha1.AfterWindowProceed})
		clusterGone("bk-b")
		clusterGone("bk-c")
	})

	It("says on the policy, Stalled, while a teardown it governs is held until a person acts, and Ready again once released", func() {
		burstFleet("br-person", "p", &v1alpha1.BlastRadius{MaxTeardowns: maxTeardowns(1)}, "bq-a", "bq-b")
		deleteCluster("bq-a")
		deleteCluster("bq-b")
		clusterGone("bq-a")
		heldByBudget("bq-b", v1alpha1.BlastRadiusExceededReason)
		Eventually(func(g Gomega) {
			p := status("br-person")(g)
			g.Expect(p.Status.ClustersHeld).To(BeEquivalentTo(1))
			ready, stalled := condition(p, v1alpha1.ReadyCondition), condition(p, v1alpha1.StalledCondition)
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.TeardownsHeldReason))
			g.Expect(ready.Message).To(HavePrefix("1 governed teardown(s) are held until a person acts (kubectl cleanup status): BlastRadiusExceeded on bq-b; "))
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Eventually(func() []string { return events("br-person") }).Should(ContainElement(HavePrefix(v1alpha1.TeardownsHeldReason + ": 1 governed teardown(s)")))

		release("bq-b", 1, time.Now())
		clusterGone("bq-b")
		Eventually(func(g Gomega) {
			p := status("br-person")(g)
			g.Expect(p.Status.ClustersHeld).To(BeZero())
			g.Expect(condition(p, v1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(p, v1alpha1.StalledCondition)).To(BeNil())
		}).Should(Succeed())
	})

	It("re-checks a share held by it when the policy comes to govern more clusters", func() {
		half := intstr.FromString("50%")
		burstFleet("br-share", "e", &v1alpha1.BlastRadius{MaxTeardowns: &half}, "bs-a", "bs-b")
		agent.setStuck("bs-a", "app", true)
		deleteCluster("bs-a")
		Eventually(func(g Gomega) { g.Expect(contentDelete(g, "bs-a").Reason).To(Equal(v1alpha1.ResourcesRemainingReason)) }).Should(Succeed())
		deleteCluster("bs-b")
		Expect(heldByBudget("bs-b", v1alpha1.BlastRadiusExceededReason)).To(ContainSubstring("maxTeardowns 1 (50% of the governed clusters)"))

		By("two more clusters governed: 50% of four is two, and bs-b goes with no event of its own")
		for _, n := range []string{"bs-c", "bs-d"} {
			// Created outside the selector, then labelled into it, so the
			// fixture's status write races no governance.
			fleetCluster(n, map[string]string{"burst": "e-later"}, true)
			Expect(k8s.Patch(ctx, getClusterNow(n), client.RawPatch("application/merge-patch+json",
				[]byte(`{"metadata":{"labels":{"burst":"e"}}}`)))).To(Succeed())
			governedBy(n, "br-share")
		}
		clusterGone("bs-b")
		agent.setStuck("bs-a", "app", false)
		clusterGone("bs-a")
	})

	It("paces teardowns at maxConcurrent, the others waiting their turn untouched", func() {
		one := int32(1)
		names := []string{"bp-a", "bp-b", "bp-c"}
		works := burstFleet("br-pace", "d", &v1alpha1.BlastRadius{MaxConcurrent: &one}, names...)
		for _, n := range names {
			agent.setStuck(n, "app", true)
			deleteCluster(n)
		}
		Eventually(func(g Gomega) { g.Expect(contentDelete(g, "bp-a").Reason).To(Equal(v1alpha1.ResourcesRemainingReason)) }).Should(Succeed())
		for _, n := range names[1:] {
			Eventually(func(g Gomega) {
				c := contentDelete(g, n)
				g.Expect(c.Reason).To(Equal(v1alpha1.WaitingForTurnReason))
				g.Expect(c.Message).To(ContainSubstring("(maxConcurrent 1): the teardowns begin in the order the clusters were deleted, 1 at a time"))
			}).Should(Succeed())
		}
		Consistently(func(g Gomega) {
			for _, n := range names[1:] {
				untouched(g, n, works[n])
			}
		}, "2s").Should(Succeed())
		agent.setStuck("bp-a", "app", false)
		clusterGone("bp-a")
		Eventually(func(g Gomega) { g.Expect(contentDelete(g, "bp-b").Reason).To(Equal(v1alpha1.ResourcesRemainingReason)) }).Should(Succeed())
		Expect(contentDelete(Default, "bp-c").Reason).To(Equal(v1alpha1.WaitingForTurnReason))
		untouched(Default, "bp-c", works["bp-c"])
		agent.setStuck("bp-b", "app", false)
		agent.setStuck("bp-c", "app", false)
		clusterGone("bp-b")
		clusterGone("bp-c")
	})
})

var _ = Describe("Blast radius validation", func() {
	AfterEach(deleteAll)

	It("admits a count or a share, and refuses anything else naming the field", func() {
		share := intstr.FromString("10%")
		Expect(k8s.Create(ctx, cleanupPolicy("br-share", v1alpha1.CleanupPolicySpec{
			BlastRadius: &v1alpha1.BlastRadius{MaxTeardowns: &share, Window: &metav1.Duration{Duration: 30 * time.Minute}},
		}))).To(Succeed())
		zero := int32(0)
		for field, b := range map[string]*v1alpha1.BlastRadius{
			"spec.blastRadius.maxTeardowns":  {MaxTeardowns: func() *intstr.IntOrString { v := intstr.FromString("150%"); return &v }()},
			"spec.blastRadius.maxTeardowns ": {MaxTeardowns: maxTeardowns(-1)},
			"spec.blastRadius.window":        {Window: &metav1.Duration{}},
			"spec.blastRadius.maxConcurrent": {MaxConcurrent: &zero},
		} {
			err := k8s.Create(ctx, cleanupPolicy("br-bad", v1alpha1.CleanupPolicySpec{BlastRadius: b}))
			Expect(err).To(MatchError(ContainSubstring(strings.TrimSpace(field))), "%s", field)
		}
	})
})
