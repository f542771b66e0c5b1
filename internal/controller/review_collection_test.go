package controller_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/controller"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// Review: the API server's deletecollection lists the snapshot at the
// exact resourceVersion, then deletes each listed NAME with no UID or
// resourceVersion precondition (k8s.io/apiserver
// pkg/registry/generic/registry/store.go, Store.DeleteCollection:
// e.Delete(ctx, accessor.GetName(), deleteValidation, options.DeepCopy())).
// So what is at that name when the server gets to it is deleted, whatever
// changed since the check.
var _ = Describe("Review: deletecollection between check and request", func() {
	AfterEach(deleteAll)

	newNamespace := func(name string) (*unstructured.Unstructured, *decision.Plan) {
		agent.setStopped(name, true)
		DeferCleanup(func() { agent.setStopped(name, false) })
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		return managedCluster(name, nil), &decision.Plan{Cluster: name, Steps: []decision.Step{{Kind: decision.StepSignal, Name: "cleanup-signal"}}}
	}
	getWork := func(ns, name string) *unstructured.Unstructured {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion(manifestWorkGVK.APIVersion)
		w.SetKind(manifestWorkGVK.Kind)
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, w)).To(Succeed())
		return w
	}

	It("does not delete a work re-created under a planned name (another UID) after the check", func() {
		mc, plan := newNamespace("rev-coll-1")
		for i := range 3 {
			work("rev-coll-1", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("rev-coll-1", "w-0", "w-1", "w-2")
		var replacement types.UID
		ok, err := controller.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, func() {
			old := getWork("rev-coll-1", "w-1")
			Expect(k8s.Delete(ctx, old)).To(Succeed())
			old = getWork("rev-coll-1", "w-1")
			before := old.DeepCopy()
			old.SetFinalizers(nil)
			Expect(k8s.Patch(ctx, old, client.MergeFrom(before))).To(Succeed())
			Eventually(objectGone("ManifestWork", "rev-coll-1", "w-1")).Should(BeTrue())
			replacement = work("rev-coll-1", "w-1", nil).GetUID()
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		now := getWork("rev-coll-1", "w-1")
		Expect(now.GetUID()).To(Equal(replacement))
		Expect(now.GetUID()).NotTo(BeElementOf(acts[0].UID, acts[1].UID, acts[2].UID))
		Expect(now.GetDeletionTimestamp()).To(BeNil(), "the plan never listed UID %s, yet the deletecollection deleted it", now.GetUID())
	})

	It("does not delete a work changed after the check (a cleanup-priority that splits the group)", func() {
		mc, plan := newNamespace("rev-coll-2")
		for i := range 3 {
			work("rev-coll-2", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("rev-coll-2", "w-0", "w-1", "w-2")
		ok, err := controller.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, func() {
			w := getWork("rev-coll-2", "w-2")
			before := w.DeepCopy()
			w.SetAnnotations(map[string]string{"open-cluster-management.io/cleanup-priority": "90"})
			Expect(k8s.Patch(ctx, w, client.MergeFrom(before))).To(Succeed())
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		// One by one, w-2's delete carries the plan's resourceVersion as a
		// precondition and is refused (Conflict); the collection has none.
		Expect(getWork("rev-coll-2", "w-2").GetDeletionTimestamp()).To(BeNil(),
			"w-2 changed after the plan (now a later cleanup-priority group) and was deleted anyway")
	})
})
