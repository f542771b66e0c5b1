package controller_test

import (
	"context"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
)

// appliedGeneration is the generation the work agent reported applied.
func appliedGeneration(g Gomega, namespace, name string) int64 {
	raw, _, _ := unstructured.NestedSlice(getWork(g, namespace, name).Object, "status", "conditions")
	for _, c := range raw {
		if m := c.(map[string]any); m["type"] == "Applied" {
			gen, _ := m["observedGeneration"].(int64)
			return gen
		}
	}
	return 0
}

// optionHistory records every propagation policy a namespace's works pass
// through, as the API server's watch delivers them.
type optionHistory struct {
	mu   sync.Mutex
	seen map[string][]string
}

func watchOptions(namespace string) *optionHistory {
	h := &optionHistory{seen: map[string][]string{}}
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: operator.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("work.open-cluster-management.io/v1")
	list.SetKind("ManifestWorkList")
	w, err := wc.Watch(ctx, list, client.InNamespace(namespace))
	Expect(err).NotTo(HaveOccurred())
	wctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		defer w.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case e, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if e.Type != watch.Added && e.Type != watch.Modified {
					continue
				}
				u := e.Object.(*unstructured.Unstructured)
				p, _, _ := unstructured.NestedString(u.Object, "spec", "deleteOption", "propagationPolicy")
				h.mu.Lock()
				if s := h.seen[u.GetName()]; len(s) == 0 || s[len(s)-1] != p {
					h.seen[u.GetName()] = append(s, p)
				}
				h.mu.Unlock()
			}
		}
	}()
	return h
}

func (h *optionHistory) of(name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen[name]...)
}

// agentWork creates a work as fieldManager, with the finalizer the agent
// puts on the works it applied.
func agentWork(namespace, name, fieldManager string, manifests ...map[string]any) {
	w := manifestWork(namespace, name, fieldManager, manifests...)
	patch := []byte(`{"metadata":{"finalizers":["` + v1alpha1.WorkAgentFinalizer + `"]}}`)
	Expect(k8s.Patch(ctx, w, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

var _ = Describe("Orphaning during a teardown", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	configMap := manifest("v1", "ConfigMap", "default", "settings")

	It("keeps every work Orphan under Needless, whatever the orphaning rules decided before", func() {
		fleetCluster("nlr-1", map[string]string{"tier": "sandbox"}, true)
		agentWork("nlr-1", "mixed", "test", crdManifest, configMap)
		Expect(k8s.Create(ctx, cleanupPolicy("needless-rules", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyNeedless},
			Orphaning:      []v1alpha1.OrphaningRule{{Name: "keep-crds", When: "manifest.kind == 'CustomResourceDefinition'"}},
		}))).To(Succeed())
		governedBy("nlr-1", "needless-rules")
		Eventually(func(g Gomega) any { return deleteOption(g, "nlr-1", "mixed")["propagationPolicy"] }).Should(Equal("SelectivelyOrphan"))
		history := watchOptions("nlr-1")

		deleteCluster("nlr-1")
		clusterGone("nlr-1")
		Expect(agent.deletedWith("nlr-1", "mixed")).To(Equal("Orphan"), "the work was deleted with another deleteOption than Orphan")
		h := history.of("mixed")
		first := -1
		for i, p := range h {
			if p == "Orphan" && first < 0 {
				first = i
			}
		}
		Expect(first).To(BeNumerically(">=", 0), "never stamped Orphan: %v", h)
		Expect(h[first:]).To(HaveEach("Orphan"), "a rule narrowed the Orphan again: %v", h)
	})

	It("waits for the agent to confirm an Orphan while the cluster is Available, past the timeout", func() {
		fleetCluster("ho-1", nil, true)
		work("ho-1", "app", nil)
		Eventually(func(g Gomega) int64 { return appliedGeneration(g, "ho-1", "app") }).Should(BeEquivalentTo(1))
		agent.setLagging("ho-1", true)
		DeferCleanup(agent.setLagging, "ho-1", false)
		Expect(k8s.Create(ctx, cleanupPolicy("handoff", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyNeedless, Timeout: &metav1.Duration{Duration: time.Second}},
		}))).To(Succeed())
		governedBy("ho-1", "handoff")

		deleteCluster("ho-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "ho-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason), "the timeout passed")
			g.Expect(c.Message).To(ContainSubstring("manifestworks/app"))
			g.Expect(c.Message).To(ContainSubstring("work agent"))
		}).Should(Succeed())
		Consistently(func(g Gomega) *metav1.Time {
			return getWork(g, "ho-1", "app").GetDeletionTimestamp()
		}, "2s").Should(BeNil(), "the work was deleted before the agent confirmed its Orphan")

		history := watchOptions("ho-1")
		agent.setLagging("ho-1", false)
		clusterGone("ho-1")
		// Past the timeout Needless forces the agent's finalizer off, so the
		// agent may never see the work deleting: its last version says how.
		Expect(history.of("app")).To(Equal([]string{"Orphan"}))
	})

	It("deletes the unconfirmed orphans of an unavailable cluster only after the timeout, and reports each", func() {
		fleetCluster("ho-2", nil, false)
		agent.setStopped("ho-2", true) // the agent is gone with the cluster
		DeferCleanup(agent.setStopped, "ho-2", false)
		work("ho-2", "app", nil)
		unconfirmed := testutil.ToFloat64(op.Metrics.UnconfirmedOrphans)
		Expect(k8s.Create(ctx, cleanupPolicy("handoff-gone", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyNeedless, Timeout: &metav1.Duration{Duration: 3 * time.Second}},
		}))).To(Succeed())
		governedBy("ho-2", "handoff-gone")

		deleteCluster("ho-2")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "ho-2")
			g.Expect(c.Reason).To(Equal(v1alpha1.OrphaningReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/app"))
			g.Expect(getWork(g, "ho-2", "app").GetDeletionTimestamp()).To(BeNil())
		}).Should(Succeed())
		clusterGone("ho-2")
		Expect(strings.Join(events("ho-2"), "\n")).To(ContainSubstring("orphan not confirmed by the agent: manifestworks/app"))
		Expect(testutil.ToFloat64(op.Metrics.UnconfirmedOrphans) - unconfirmed).To(BeEquivalentTo(1))
	})

	It("waits for the agent to apply a SelectivelyOrphan before deleting the work under Required", func() {
		fleetCluster("so-1", nil, true)
		agent.setLagging("so-1", true)
		DeferCleanup(agent.setLagging, "so-1", false)
		agentWork("so-1", "mixed", "test", crdManifest, configMap)
		Expect(k8s.Create(ctx, cleanupPolicy("selective", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-crds", When: "manifest.kind == 'CustomResourceDefinition'"}},
		}))).To(Succeed())
		governedBy("so-1", "selective")
		Eventually(func(g Gomega) any { return deleteOption(g, "so-1", "mixed")["propagationPolicy"] }).Should(Equal("SelectivelyOrphan"))

		deleteCluster("so-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "so-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.OrphaningReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/mixed"))
		}).Should(Succeed())
		Consistently(func(g Gomega) *metav1.Time {
			return getWork(g, "so-1", "mixed").GetDeletionTimestamp()
		}, "2s").Should(BeNil(), "the work was deleted before the agent applied its SelectivelyOrphan")

		agent.setLagging("so-1", false)
		clusterGone("so-1")
		Expect(agent.deletedWith("so-1", "mixed")).To(Equal("SelectivelyOrphan"))
	})

	It("holds the cleanup at a work whose orphaning decision cannot be made, naming the work and the rule", func() {
		fleetCluster("od-1", nil, true)
		addon("od-1", "search")
		agentWork("od-1", "widgets", "test", manifest("example.com/v1", "Widget", "default", "w1"))
		p := cleanupPolicy("undecidable", v1alpha1.CleanupPolicySpec{
			Orphaning: []v1alpha1.OrphaningRule{{Name: "keep-widgets", When: "manifest.kind == 'Widget'"}},
		})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		governedBy("od-1", "undecidable")

		deleteCluster("od-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "od-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/widgets"))
			g.Expect(c.Message).To(ContainSubstring("keep-widgets"))
		}).Should(Succeed())
		Consistently(func(g Gomega) *metav1.Time {
			return getWork(g, "od-1", "widgets").GetDeletionTimestamp()
		}, "2s").Should(BeNil(), "the work was deleted without its orphaning decision")
		Expect(objectGone("ManagedClusterAddOn", "od-1", "search")()).To(BeFalse(), "the cleanup went on past the hold")

		By("going on once the rule is removed")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		before := p.DeepCopy()
		p.Spec.Orphaning = nil
		Expect(k8s.Patch(ctx, p, client.MergeFrom(before))).To(Succeed())
		clusterGone("od-1")
	})

	It("reads the cluster namespace whole for keepNamespace, as the preview does", func() {
		fleetCluster("nsk-1", nil, true)
		addon("nsk-1", "search")
		Expect(k8s.Create(ctx, cleanupPolicy("keep-active", v1alpha1.CleanupPolicySpec{
			KeepNamespace: "namespace.status.phase == 'Active'",
		}))).To(Succeed())
		governedBy("nsk-1", "keep-active")

		deleteCluster("nsk-1")
		clusterGone("nsk-1")
		Expect(namespaceDeleting(Default, "nsk-1")).To(BeFalse(), "the namespace the policy keeps was deleted")
		Expect(objectGone("ManagedClusterAddOn", "nsk-1", "search")()).To(BeTrue())
	})

	It("holds a Needless cleanup at a work whose deleteOption another manager owns, and goes on once it lets go", func() {
		fleetCluster("own-1", nil, true)
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "theirs", "namespace": "own-1"},
			"spec": map[string]any{
				"workload": map[string]any{"manifests": []any{crdManifest, configMap}},
				"deleteOption": map[string]any{"propagationPolicy": "SelectivelyOrphan", "selectivelyOrphans": map[string]any{
					"orphaningRules": []any{map[string]any{"group": "", "resource": "configmaps", "namespace": "default", "name": "settings"}}}},
			},
		}}
		Expect(k8s.Patch(ctx, w, client.Apply, client.FieldOwner("gitops"))).To(Succeed())
		Expect(k8s.Create(ctx, cleanupPolicy("needless-theirs", v1alpha1.CleanupPolicySpec{
			RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyNeedless},
		}))).To(Succeed())
		governedBy("own-1", "needless-theirs")

		deleteCluster("own-1")
		Eventually(func(g Gomega) {
			c := contentDelete(g, "own-1")
			g.Expect(c.Reason).To(Equal(v1alpha1.CleanupFailedReason))
			g.Expect(c.Message).To(ContainSubstring("manifestworks/theirs: another manager owns spec.deleteOption (SelectivelyOrphan: configmaps/settings: \"gitops\" applied it"))
		}).Should(Succeed())
		Consistently(func(g Gomega) *metav1.Time {
			return getWork(g, "own-1", "theirs").GetDeletionTimestamp()
		}, "2s").Should(BeNil(), "the work was deleted with a deleteOption that is not Orphan")

		By("going on once the other manager gives the field up")
		delete(w.Object["spec"].(map[string]any), "deleteOption")
		w.SetManagedFields(nil)
		w.SetResourceVersion("")
		Expect(k8s.Patch(ctx, w, client.Apply, client.FieldOwner("gitops"))).To(Succeed())
		clusterGone("own-1")
	})
})
