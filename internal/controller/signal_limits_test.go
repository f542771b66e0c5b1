package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
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
