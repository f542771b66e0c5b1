package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// argoManager is the field manager Argo CD applies with under ServerSideApply=true.
const argoManager = "argocd-controller"

// assessment is what kstatus and the Argo CD health check say of one policy.
type assessment struct {
	object  *unstructured.Unstructured
	kstatus *status.Result
	argo    health
}

// assess reads the policy as GitOps tools read it and computes both views.
func assess(g Gomega, name string) assessment {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicy"))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, u)).To(Succeed())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(HaveOccurred())
	h, err := runHealth(policyHealthScript(GinkgoT()), u.Object)
	g.Expect(err).NotTo(HaveOccurred())
	a := assessment{object: u, kstatus: res, argo: h}
	keep(g, a)
	return a
}

// argoHealthOf is the Argo CD health that agrees with a kstatus status.
var argoHealthOf = map[status.Status]string{
	status.CurrentStatus:    "Healthy",
	status.InProgressStatus: "Progressing",
	status.FailedStatus:     "Degraded",
}

func conditionOf(g Gomega, a assessment, typ string) metav1.Condition {
	var p v1alpha1.CleanupPolicy
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(a.object.Object, &p)).To(Succeed())
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "no %s condition", typ)
	return *c
}

func managedCluster(name string, labels map[string]string) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("cluster.open-cluster-management.io/v1")
	u.SetKind("ManagedCluster")
	u.SetName(name)
	u.SetLabels(labels)
	Expect(unstructured.SetNestedField(u.Object, true, "spec", "hubAcceptsClient")).To(Succeed())
	Expect(k8s.Create(ctx, u)).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
}

// governedCluster waits until the operator governs the named cluster with
// the policy (its finalizer and pin on it) and returns the cluster.
func governedCluster(name, policy string) *unstructured.Unstructured {
	GinkgoHelper()
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion("cluster.open-cluster-management.io/v1")
	cluster.SetKind("ManagedCluster")
	cluster.SetName(name)
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		g.Expect(cluster.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
		g.Expect(cluster.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, policy))
	}).Should(Succeed())
	return cluster
}

func createPolicy(name string, spec v1alpha1.CleanupPolicySpec) error {
	if spec.RemoveStrategy.Default == "" {
		spec.RemoveStrategy.Default = v1alpha1.RemoveStrategyRequired
	}
	return k8s.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
}

// applyAsArgoCD applies obj as Argo CD does with ServerSideApply=true: its
// own field manager, conflicts forced.
func applyAsArgoCD(obj *unstructured.Unstructured) {
	Expect(k8s.Patch(ctx, obj.DeepCopy(), client.Apply, client.FieldOwner(argoManager), client.ForceOwnership)).To(Succeed())
}

// applyClientSide applies obj as Argo CD does without ServerSideApply=true:
// kubectl apply, client-side, under Argo CD's field manager.
func applyClientSide(obj *unstructured.Unstructured) {
	raw, err := json.Marshal(obj.Object)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", env.Kubeconfig,
		"apply", "--field-manager", argoManager, "-f", "-")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl apply: %s", out)
}

// getLive reads obj from the API server.
func getLive(g Gomega, obj *unstructured.Unstructured) *unstructured.Unstructured {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), live)).To(Succeed())
	return live
}

// owns says whether manager owns the field at path on obj, as its
// managedFields entries record it (server-side apply or not).
func owns(g Gomega, obj *unstructured.Unstructured, manager string, path ...string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		var node map[string]any
		g.Expect(json.Unmarshal(e.FieldsV1.Raw, &node)).To(Succeed())
		owned := true
		for _, name := range path {
			next, ok := node["f:"+name].(map[string]any)
			if !ok {
				owned = false
				break
			}
			node = next
		}
		if owned {
			return true
		}
	}
	return false
}

var _ = Describe("kstatus and the Argo CD health check on policies the operator reconciled", Ordered, func() {
	BeforeAll(func() {
		managedCluster("edge-1", map[string]string{"env": "prod"})
		managedCluster("edge-2", map[string]string{"env": "prod"})
		managedCluster("lab-1", nil)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "standalone"}})).To(Succeed())
	})

	It("says Current and Healthy, with the counts, once a valid policy is reconciled", func() {
		Expect(createPolicy("ready", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'prod'",
			Priority:        10,
			Orphaning:       []v1alpha1.OrphaningRule{{Name: "keep-configmaps", When: "manifest.kind == 'ConfigMap'"}},
		})).To(Succeed())

		Eventually(func(g Gomega) {
			a := assess(g, "ready")
			g.Expect(a.object.GetGeneration()).To(BeEquivalentTo(1))
			ready := conditionOf(g, a, v1alpha1.ReadyCondition)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
			g.Expect(a.argo).To(Equal(health{Status: "Healthy", Message: "matches 2 cluster(s) and governs 2"}))
		}).Should(Succeed())
	})

	It("leaves the fields Argo CD applies to Argo CD, and owns the ones it stamps under its own field manager", func() {
		Expect(createPolicy("fallback", v1alpha1.CleanupPolicySpec{
			Prune: &v1alpha1.Prune{Default: v1alpha1.PruneDeleteIfCreated},
		})).To(Succeed())

		// A ManifestWork and a standalone ConfigurationPolicy from Git.
		work := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "app", "namespace": "edge-1"},
			"spec": map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app", "namespace": "default"},
			}}}},
		}}
		applyAsArgoCD(work)
		cfg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
			"metadata": map[string]any{"name": "app", "namespace": "standalone"},
			"spec": map[string]any{
				"remediationAction": "enforce", "severity": "low",
				"object-templates": []any{map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app", "namespace": "default"},
				}}},
			},
		}}
		applyAsArgoCD(cfg)

		stamped := func(g Gomega, obj *unstructured.Unstructured, field []string, want string) *unstructured.Unstructured {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(obj.GroupVersionKind())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), live)).To(Succeed())
			got, _, _ := unstructured.NestedString(live.Object, field...)
			g.Expect(got).To(Equal(want))
			return live
		}
		check := func(g Gomega, obj *unstructured.Unstructured, field []string, want, annotation string) {
			live := stamped(g, obj, field, want)
			g.Expect(owns(g, live, v1alpha1.FieldManager, field...)).To(BeTrue(),
				"%s does not own %s", v1alpha1.FieldManager, strings.Join(field, "."))
			g.Expect(owns(g, live, v1alpha1.FieldManager, "metadata", "annotations", annotation)).To(BeTrue(),
				"%s does not own the annotation %s", v1alpha1.FieldManager, annotation)
			g.Expect(owns(g, live, argoManager, field[:2]...)).To(BeFalse(), "Argo CD owns %s", strings.Join(field[:2], "."))
			g.Expect(owns(g, live, argoManager, "spec")).To(BeTrue(), "Argo CD owns none of the spec")
		}
		Eventually(func(g Gomega) {
			check(g, work, []string{"spec", "deleteOption", "propagationPolicy"}, "Orphan", "cleanup.fleetops.dev/orphaning")
			check(g, cfg, []string{"spec", "pruneObjectBehavior"}, "DeleteIfCreated", "cleanup.fleetops.dev/prune")
		}).Should(Succeed())

		By("syncing again from Git: the stamped fields stay, with their owner")
		applyAsArgoCD(work)
		applyAsArgoCD(cfg)
		check(Default, work, []string{"spec", "deleteOption", "propagationPolicy"}, "Orphan", "cleanup.fleetops.dev/orphaning")
		check(Default, cfg, []string{"spec", "pruneObjectBehavior"}, "DeleteIfCreated", "cleanup.fleetops.dev/prune")

		By("marking the governed clusters with the names the Application ignores by path")
		Eventually(func(g Gomega) {
			mc := &unstructured.Unstructured{}
			mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
			mc.SetKind("ManagedCluster")
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "edge-1"}, mc)).To(Succeed())
			g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
			g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "ready"))
			var managers []string
			for _, e := range mc.GetManagedFields() {
				managers = append(managers, fmt.Sprintf("%s (%s)", e.Manager, e.Operation))
			}
			GinkgoWriter.Printf("managers of ManagedCluster edge-1: %s\n", strings.Join(managers, ", "))
		}).Should(Succeed())
	})

	// Without ServerSideApply=true Argo CD syncs as kubectl apply does: an
	// ordinary create or patch, whose manager owns every field the API
	// server set, the CRD's defaults included, and the configuration it
	// sent recorded in the last-applied-configuration annotation.
	clientSide := func(name string, prune string) *unstructured.Unstructured {
		spec := map[string]any{
			"remediationAction": "enforce", "severity": "low",
			"object-templates": []any{map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
			}}},
		}
		if prune != "" {
			spec["pruneObjectBehavior"] = prune
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
			"metadata": map[string]any{"name": name, "namespace": "standalone"}, "spec": spec,
		}}
	}

	It("stamps what a client-side apply created without the field: the CRD's default was nobody's", func() {
		cfg := clientSide("client-side", "")
		// Created with pruneObjectBehavior: None, owned by Argo CD (the
		// operator may already have stamped it by the time it is read).
		applyClientSide(cfg)
		// A work from Git, synced the same way, with no deleteOption.
		work := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "client-side", "namespace": "edge-2"},
			"spec": map[string]any{"workload": map[string]any{"manifests": []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "client-side", "namespace": "default"},
			}}}},
		}}
		applyClientSide(work)

		Eventually(func(g Gomega) {
			live := getLive(g, cfg)
			g.Expect(live.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("pruneObjectBehavior", "DeleteIfCreated")))
			g.Expect(owns(g, live, v1alpha1.FieldManager, "spec", "pruneObjectBehavior")).To(BeTrue())
			g.Expect(owns(g, live, argoManager, "spec", "pruneObjectBehavior")).To(BeFalse())
			w := getLive(g, work)
			g.Expect(w.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("deleteOption", HaveKeyWithValue("propagationPolicy", "Orphan"))))
			g.Expect(owns(g, w, v1alpha1.FieldManager, "spec", "deleteOption", "propagationPolicy")).To(BeTrue())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			a := assess(g, "fallback")
			g.Expect(a.object.Object).NotTo(HaveKeyWithValue("status", HaveKey("conflicts")))
			g.Expect(a.argo.Status).To(Equal("Healthy"))
			g.Expect(a.argo.Message).NotTo(ContainSubstring("conflict"))
		}).Should(Succeed())

		By("syncing again from Git: the stamp stays")
		applyClientSide(cfg)
		applyClientSide(work)
		Consistently(func(g Gomega) {
			g.Expect(getLive(g, cfg).Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("pruneObjectBehavior", "DeleteIfCreated")))
			g.Expect(getLive(g, work).Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("deleteOption", HaveKeyWithValue("propagationPolicy", "Orphan"))))
		}, "2s").Should(Succeed())
		Expect(k8s.Delete(ctx, cfg)).To(Succeed())
		Expect(k8s.Delete(ctx, work)).To(Succeed())
	})

	It("leaves what a client-side apply wrote, and the policy reports the conflict", func() {
		cfg := clientSide("client-side-written", "None")
		applyClientSide(cfg)

		Eventually(func(g Gomega) {
			a := assess(g, "fallback")
			g.Expect(a.object.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("conflicts", BeEquivalentTo(1))))
			g.Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
			ready := conditionOf(g, a, v1alpha1.ReadyCondition)
			g.Expect(a.argo).To(Equal(health{Status: "Healthy",
				Message: ready.Message + "; 1 object(s) in conflict with another field manager"}))
		}).Should(Succeed())
		live := getLive(Default, cfg)
		Expect(live.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("pruneObjectBehavior", "None")))
		Expect(owns(Default, live, v1alpha1.FieldManager, "spec", "pruneObjectBehavior")).To(BeFalse())
		Expect(k8s.Delete(ctx, cfg)).To(Succeed())
	})

	It("says Failed and Degraded, naming the field and the clusters, when a selector the webhook admitted fails at run time", func() {
		// Compiles (labels is a map of strings), fails where the key is absent.
		Expect(createPolicy("strict", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels['env'] == 'prod'",
			Priority:        -10,
		})).To(Succeed())

		Eventually(func(g Gomega) {
			a := assess(g, "strict")
			stalled := conditionOf(g, a, v1alpha1.StalledCondition)
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(stalled.Reason).To(Equal(v1alpha1.EvaluationErrorReason))
			g.Expect(stalled.Message).To(ContainSubstring("lab-1"))
			g.Expect(stalled.Message).To(ContainSubstring("spec.clusterSelector"))
			g.Expect(a.kstatus.Status).To(Equal(status.FailedStatus))
			g.Expect(a.kstatus.Message).To(Equal(stalled.Message))
			g.Expect(a.argo).To(Equal(health{Status: "Degraded", Message: stalled.Reason + ": " + stalled.Message}))
		}).Should(Succeed())
		Expect(k8s.Delete(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "strict"}})).To(Succeed())
	})

	Context("while the operator and its webhook are down", func() {
		var saved *admissionregistrationv1.ValidatingWebhookConfiguration

		BeforeEach(func() {
			stopManager()
			var list admissionregistrationv1.ValidatingWebhookConfigurationList
			Expect(k8s.List(ctx, &list)).To(Succeed())
			Expect(list.Items).To(HaveLen(1))
			saved = list.Items[0].DeepCopy()
			Expect(k8s.Delete(ctx, &list.Items[0])).To(Succeed())
			DeferCleanup(func() {
				var list admissionregistrationv1.ValidatingWebhookConfigurationList
				Expect(k8s.List(ctx, &list)).To(Succeed())
				if len(list.Items) == 0 {
					saved.ResourceVersion = ""
					Expect(k8s.Create(ctx, saved)).To(Succeed())
				}
				if running == nil {
					startManager()
				}
			})
		})

		It("says InProgress and Progressing for a spec the operator has not seen, and Failed and Degraded once it finds it invalid", func() {
			By("changing a ready policy's spec: generation 2, status of generation 1")
			Eventually(func() error {
				// until the API server has dropped the webhook
				p := &v1alpha1.CleanupPolicy{}
				if err := k8s.Get(ctx, client.ObjectKey{Name: "ready"}, p); err != nil {
					return err
				}
				before := p.DeepCopy()
				p.Spec.Priority = 11
				return k8s.Patch(ctx, p, client.MergeFrom(before))
			}).Should(Succeed())
			a := assess(Default, "ready")
			Expect(a.object.GetGeneration()).To(BeEquivalentTo(2))
			Expect(a.kstatus.Status).To(Equal(status.InProgressStatus))
			Expect(a.kstatus.Message).To(Equal("CleanupPolicy generation is 2, but latest observed generation is 1"))
			Expect(a.argo).To(Equal(health{Status: "Progressing",
				Message: "Waiting for the operator to observe generation 2 (the status describes generation 1)"}))

			By("creating a policy that does not compile: no status yet")
			Eventually(func() error {
				return createPolicy("broken", v1alpha1.CleanupPolicySpec{ClusterSelector: "cluster.metadata.lables['env'] == 'prod'"})
			}).Should(Succeed())
			a = assess(Default, "broken")
			// kstatus cannot tell a policy nobody reconciled yet from a
			// current one (no observedGeneration, no conditions); the
			// health check waits for the operator's first status.
			Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
			Expect(a.argo).To(Equal(health{Status: "Progressing", Message: "Waiting for the operator to report the policy's status"}))

			By("starting the operator again")
			saved.ResourceVersion = ""
			Expect(k8s.Create(ctx, saved)).To(Succeed())
			startManager()
			Eventually(func() string {
				// until the API server calls the webhook again
				err := createPolicy("probe", v1alpha1.CleanupPolicySpec{ClusterSelector: "cluster.metadata.lables['env'] == 'prod'"})
				if err == nil {
					Expect(k8s.Delete(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "probe"}})).To(Succeed())
					return ""
				}
				return err.Error()
			}).Should(ContainSubstring("spec.clusterSelector"))

			Eventually(func(g Gomega) {
				a := assess(g, "ready")
				g.Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
				g.Expect(a.argo.Status).To(Equal("Healthy"))
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				a := assess(g, "broken")
				stalled := conditionOf(g, a, v1alpha1.StalledCondition)
				g.Expect(stalled.Reason).To(Equal(v1alpha1.InvalidCELExpressionReason))
				g.Expect(stalled.Message).To(HavePrefix("spec.clusterSelector: "))
				g.Expect(stalled.Message).To(ContainSubstring("undefined field 'lables'"))
				g.Expect(a.kstatus.Status).To(Equal(status.FailedStatus))
				g.Expect(a.kstatus.Message).To(Equal(stalled.Message))
				g.Expect(a.argo).To(Equal(health{Status: "Degraded", Message: "InvalidCELExpression: " + stalled.Message}))
			}).Should(Succeed())
		})
	})

	It("says Suspended while spec.suspend is true: kstatus Current once the suspend is reported, InProgress after an edit made while suspended", func() {
		Expect(createPolicy("frozen", v1alpha1.CleanupPolicySpec{ClusterSelector: "cluster.metadata.name == 'lab-1'"})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(assess(g, "frozen").argo.Status).To(Equal("Healthy"))
		}).Should(Succeed())
		patch := func(p string) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicy"))
			u.SetName("frozen")
			Expect(k8s.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(p)))).To(Succeed())
		}
		suspended := health{Status: "Suspended", Message: "spec.suspend is true: the operator writes nothing for what the policy governs until it is resumed"}

		patch(`{"spec":{"suspend":true}}`)
		Eventually(func(g Gomega) {
			a := assess(g, "frozen")
			ready := conditionOf(g, a, v1alpha1.ReadyCondition)
			g.Expect(ready.Reason).To(Equal(v1alpha1.SuspendedReason))
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(ready.ObservedGeneration).To(Equal(a.object.GetGeneration()))
			g.Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
			g.Expect(a.argo).To(Equal(suspended))
		}).Should(Succeed())

		By("editing the suspended policy: no status write, so kstatus sees a generation not observed")
		patch(`{"spec":{"priority":3}}`)
		Consistently(func(g Gomega) {
			a := assess(g, "frozen")
			g.Expect(a.object.GetGeneration()).To(BeEquivalentTo(3))
			observed, _, _ := unstructured.NestedInt64(a.object.Object, "status", "observedGeneration")
			g.Expect(observed).To(BeEquivalentTo(2))
			g.Expect(a.kstatus.Status).To(Equal(status.InProgressStatus))
			g.Expect(a.argo).To(Equal(suspended))
		}, "2s").Should(Succeed())

		By("resuming: reconciled again, Current and Healthy")
		patch(`{"spec":{"suspend":null}}`)
		Eventually(func(g Gomega) {
			a := assess(g, "frozen")
			g.Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
			g.Expect(a.argo.Status).To(Equal("Healthy"))
			g.Expect(conditionOf(g, a, v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.SucceededReason))
		}).Should(Succeed())
	})

	It("says Failed and Degraded while a governed teardown waits for a person, naming it, and Current and Healthy once it is released, without an edit", func() {
		zero := intstr.FromInt32(0)
		Expect(createPolicy("budget", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'burst'].orValue('') == 'held'",
			Priority:        20,
			KeepNamespace:   "true",
			BlastRadius:     &v1alpha1.BlastRadius{MaxTeardowns: &zero},
		})).To(Succeed())
		managedCluster("held-1", map[string]string{"burst": "held"})
		cluster := governedCluster("held-1", "budget")
		Expect(k8s.Delete(ctx, cluster.DeepCopy())).To(Succeed())

		Eventually(func(g Gomega) {
			a := assess(g, "budget")
			stalled := conditionOf(g, a, v1alpha1.StalledCondition)
			g.Expect(stalled.Reason).To(Equal(v1alpha1.TeardownsHeldReason))
			g.Expect(stalled.Message).To(HavePrefix("1 governed teardown(s) are held until a person acts (kubectl cleanup status): BlastRadiusExceeded on held-1; "))
			g.Expect(a.kstatus.Status).To(Equal(status.FailedStatus))
			g.Expect(a.kstatus.Message).To(Equal(stalled.Message))
			g.Expect(a.argo).To(Equal(health{Status: "Degraded", Message: stalled.Reason + ": " + stalled.Message}))
		}).Should(Succeed())

		release := fmt.Sprintf(`{"metadata":{"annotations":{%q:"1/%s"}}}`, v1alpha1.BlastRadiusReleasedAnnotation, time.Now().UTC().Format(time.RFC3339))
		Eventually(func() error {
			return k8s.Patch(ctx, cluster.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(release)))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			a := assess(g, "budget")
			g.Expect(a.kstatus.Status).To(Equal(status.CurrentStatus))
			g.Expect(a.argo.Status).To(Equal("Healthy"))
			g.Expect(conditionOf(g, a, v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.SucceededReason))
		}).WithTimeout(time.Minute).Should(Succeed())
	})

	It("gives the same answer as kstatus on every policy the operator has written a status for", func() {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicyList"))
		Expect(k8s.List(ctx, &list)).To(Succeed())
		var seen []string
		for i := range list.Items {
			a := assess(Default, list.Items[i].GetName())
			if _, ok := a.object.Object["status"]; !ok {
				continue
			}
			Expect(a.argo.Status).To(Equal(argoHealthOf[a.kstatus.Status]), "%s: kstatus %s %q", a.object.GetName(), a.kstatus.Status, a.kstatus.Message)
			seen = append(seen, a.argo.Status)
		}
		Expect(slices.Compact(slices.Sorted(slices.Values(seen)))).To(Equal([]string{"Degraded", "Healthy"}))
	})
})
