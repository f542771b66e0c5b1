package controller_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/governance"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
)

// signalPolicy compiles a policy whose deletion signal is the work alive
// carrying one ConfigMap named configMap.
func signalPolicy(configMap string) *cel.Policy {
	env, err := cel.NewEnv(cel.Schemas{})
	Expect(err).NotTo(HaveOccurred())
	p, errs := cel.Compile(env, cleanupPolicy("race", v1alpha1.CleanupPolicySpec{DeletionSignal: &v1alpha1.DeletionSignal{
		WorkName: "alive", Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + configMap + `","namespace":"kube-system"}}`)}}}}}))
	Expect(errs).To(BeEmpty())
	return p
}

// racing is a client of the suite's API server that runs meddle once,
// right after its first read of the object named key: another writer
// acting between the operator's read and its write.
func racing(key client.ObjectKey, meddle func()) client.Client {
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: operator.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	var once sync.Once
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, k, obj, opts...)
			if k == key {
				once.Do(meddle)
			}
			return err
		},
	})
}

var _ = Describe("The deletion-signal work", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("never takes over a work someone creates, or creates again, under its name while the operator writes it", func() {
		fleetCluster("sig-race", nil, true)
		// Governed by a suspended policy, the cluster gets no write from the
		// running operator, which would otherwise retire the signal works
		// of an ungoverned cluster: the test writes them alone.
		Expect(k8s.Create(ctx, cleanupPolicy("sig-race-hold", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.name == 'sig-race'", Suspend: true}))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(condition(status("sig-race-hold")(g), v1alpha1.ReadyCondition).Reason).To(Equal(v1alpha1.SuspendedReason))
		}).Should(Succeed())
		mc := getClusterNow("sig-race")
		key := client.ObjectKey{Namespace: "sig-race", Name: "alive"}
		signalWork := func() *unstructured.Unstructured {
			w := &unstructured.Unstructured{}
			w.SetAPIVersion("work.open-cluster-management.io/v1")
			w.SetKind("ManifestWork")
			w.SetNamespace(key.Namespace)
			w.SetName(key.Name)
			return w
		}
		// Someone else's work of that name, with a manifest of its own.
		theirManifests := []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "theirs", "namespace": "default"}}}
		create := func() {
			w := signalWork()
			w.Object["spec"] = map[string]any{"workload": map[string]any{"manifests": theirManifests}}
			Expect(k8s.Create(ctx, w)).To(Succeed())
		}
		theirs := func() {
			defer GinkgoRecover()
			create()
		}
		remove := func() {
			Expect(k8s.Delete(ctx, signalWork())).To(Succeed())
			Eventually(objectGone("ManifestWork", key.Namespace, key.Name)).Should(BeTrue())
		}
		theirsUntouched := func() {
			w := signalWork()
			Expect(k8s.Get(ctx, key, w)).To(Succeed())
			Expect(w.GetLabels()).NotTo(HaveKey(v1alpha1.ManagedByLabel))
			Expect(w.GetLabels()).NotTo(HaveKey(v1alpha1.SignalWorkLabel))
			Expect(w.GetAnnotations()).NotTo(HaveKey(v1alpha1.SpecHashAnnotation))
			Expect(w.Object["spec"]).To(Equal(map[string]any{"workload": map[string]any{"manifests": theirManifests}}))
		}

		By("created between the operator's last read, which found none, and its write")
		// The cache finds none, then the API server finds none.
		err := governance.ApplySignalWork(ctx, k8s, racing(key, theirs), mc, "alive", signalPolicy("cluster-alive"))
		Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
		theirsUntouched()

		By("deleted and created again between the read of the operator's own work and its write")
		remove()
		Expect(governance.ApplySignalWork(ctx, k8s, k8s, mc, "alive", signalPolicy("cluster-alive"))).To(Succeed())
		c := racing(key, func() {
			defer GinkgoRecover()
			remove()
			create()
		})
		// Other manifests: the operator's work is read, and must be rewritten.
		err = governance.ApplySignalWork(ctx, c, c, mc, "alive", signalPolicy("cluster-alive-2"))
		// Refused: the work there is not the work read.
		Expect(apierrors.IsConflict(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		theirsUntouched()

		By("changed between the read of the operator's own work and its write, as a teardown's stamp changes it")
		remove()
		Expect(governance.ApplySignalWork(ctx, k8s, k8s, mc, "alive", signalPolicy("cluster-alive"))).To(Succeed())
		orphan := []byte(`{"spec":{"deleteOption":{"propagationPolicy":"Orphan"}}}`)
		c = racing(key, func() {
			defer GinkgoRecover()
			Expect(k8s.Patch(ctx, signalWork(), client.RawPatch(types.MergePatchType, orphan))).To(Succeed())
		})
		err = governance.ApplySignalWork(ctx, c, c, mc, "alive", signalPolicy("cluster-alive-2"))
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)
		w := signalWork()
		Expect(k8s.Get(ctx, key, w)).To(Succeed())
		policy, _, _ := unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy")
		Expect(policy).To(Equal("Orphan"), "the stamp made after the read is undone")
	})
})
