package controller_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

var _ = Describe("Deletion-signal limits", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("applies no signal work for a policy admitted before tighter limits, and says why on the policy", func() {
		// Governed only once labelled, after the restart.
		fleetCluster("sig-limit-1", nil, true)
		// A 2 KiB manifest, admitted under the default 16 KiB.
		raw := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"},` +
			`"data":{"note":"` + strings.Repeat("x", 2048) + `"}}`
		Expect(k8s.Create(ctx, cleanupPolicy("signal-limits", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "has(cluster.metadata.labels) && 'signal-limit' in cluster.metadata.labels",
			DeletionSignal: &v1alpha1.DeletionSignal{WorkName: "alive", Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
				Raw: []byte(raw)}}}},
		}))).To(Succeed())

		By("restarting the operator with a 1 KiB limit")
		stopManager()
		startManagerWith(nil, operator.Options{SignalLimits: admissionpolicy.SignalLimits{
			Kinds: []string{"v1/ConfigMap"}, MaxBytes: 1024, MaxTotalBytes: 4096}})
		DeferCleanup(func() {
			stopManager()
			startManager()
		})
		Eventually(func(g Gomega) {
			p := &v1alpha1.CleanupPolicy{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "signal-limits"}, p)).To(Succeed())
			ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.SignalRefusedReason))
			g.Expect(ready.Message).To(ContainSubstring("no deletion-signal work is applied: spec.deletionSignal.manifests[0]: Too long"))
		}).Should(Succeed())

		By("governing a cluster without a signal work")
		mc := &unstructured.Unstructured{}
		mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
		mc.SetKind("ManagedCluster")
		mc.SetName("sig-limit-1")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"signal-limit":"yes"}}}`)))).To(Succeed())
		governedBy("sig-limit-1", "signal-limits")
		work := &unstructured.Unstructured{}
		work.SetAPIVersion("work.open-cluster-management.io/v1")
		work.SetKind("ManifestWork")
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: "sig-limit-1", Name: "alive"}, work)
		}, "2s").Should(Satisfy(apierrors.IsNotFound))
	})
})

var _ = Describe("Policy authority with the webhook running", func() {
	AfterEach(deleteAll)

	It("refuses an editor's policy that exercises a right the editor lacks, and an oversized signal manifest", func() {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "cleanuppolicy_editor_role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		editorRole := &rbacv1.ClusterRole{}
		Expect(yaml.UnmarshalStrict(raw, editorRole)).To(Succeed())
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, editorRole))).To(Succeed())
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "editor-only"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: editorRole.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "editor-only"}}}
		Expect(k8s.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, binding)).To(Succeed()) })
		user, err := env.AddUser(envtest.User{Name: "editor-only"}, nil)
		Expect(err).NotTo(HaveOccurred())
		editor, err := client.New(user.Config(), client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())

		stages := cleanupPolicy("configmaps", v1alpha1.CleanupPolicySpec{KeepNamespace: "true",
			DeletionStages: []v1alpha1.DeletionStage{{Name: "cms", GroupVersionResource: v1alpha1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}})
		err = editor.Create(ctx, stages)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(`may not delete configmaps in every namespace (verb delete, group "", resource configmaps)`))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "configmaps"}, &v1alpha1.CleanupPolicy{})).To(Satisfy(apierrors.IsNotFound))

		// The webhook measures what the admission policy cannot.
		big := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"default"},"data":{"x":"` +
			strings.Repeat("x", admissionpolicy.DefaultSignalLimits().MaxBytes) + `"}}`
		err = k8s.Create(ctx, cleanupPolicy("oversized", v1alpha1.CleanupPolicySpec{
			DeletionSignal: &v1alpha1.DeletionSignal{Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(big)}}}}}))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.deletionSignal.manifests[0]: Too long"))
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "oversized"}, &v1alpha1.CleanupPolicy{})).To(Satisfy(apierrors.IsNotFound))
	})
})
