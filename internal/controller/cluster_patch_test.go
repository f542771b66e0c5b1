package controller_test

import (
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The teardown writes a ManagedCluster through one helper: these specs
// check what it writes, and that it never writes over another writer.
var _ = Describe("Cluster patch helper", func() {
	const (
		name  = "patch-helper"
		hold  = "example.com/hold"
		other = "example.com/other"
		note  = "example.com/note"
		held  = "example.com/held"
	)
	BeforeEach(func() {
		mc := managedCluster(name, nil)
		mc.SetFinalizers([]string{hold})
		Expect(k8s.Create(ctx, mc)).To(Succeed())
	})
	AfterEach(func() {
		mc := getClusterNow(name)
		mc.SetFinalizers(nil)
		Expect(k8s.Update(ctx, mc)).To(Succeed())
		Expect(k8s.Delete(ctx, mc)).To(Succeed())
		Eventually(objectGone("ManagedCluster", "", name), 10*time.Second).Should(BeTrue())
	})

	// byAnother changes the cluster as another writer would.
	byAnother := func(change func(mc *unstructured.Unstructured)) {
		mc := getClusterNow(name)
		change(mc)
		Expect(k8s.Update(ctx, mc)).To(Succeed())
	}

	It("flushes the metadata and the status that changed, once, and nothing when nothing changed", func() {
		p := teardown.NewClusterPatch(k8s, getClusterNow(name))
		p.Annotate(note, "1")
		Expect(p.SetCondition("Testing", "a step")).To(BeTrue())
		metadata, status, err := p.Flush(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect([]bool{metadata, status}).To(Equal([]bool{true, true}))

		Expect(getClusterNow(name).GetAnnotations()).To(HaveKeyWithValue(note, "1"))
		Expect(contentDelete(Default, name).Reason).To(Equal("Testing"))

		metadata, status, err = p.Flush(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect([]bool{metadata, status}).To(Equal([]bool{false, false}), "nothing changed since the last flush")

		By("a second change, on the cluster as the first flush left it")
		p.Annotate(note, "2")
		metadata, status, err = p.Flush(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect([]bool{metadata, status}).To(Equal([]bool{true, false}))
		Expect(getClusterNow(name).GetAnnotations()).To(HaveKeyWithValue(note, "2"))
	})

	It("never writes over a change another writer made since the read", func() {
		p := teardown.NewClusterPatch(k8s, getClusterNow(name))
		byAnother(func(mc *unstructured.Unstructured) { mc.SetAnnotations(map[string]string{other: "theirs"}) })

		p.Annotate(note, "1")
		_, _, err := p.Flush(ctx)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "a conflict, not a write: %v", err)
		Expect(getClusterNow(name).GetAnnotations()).To(Equal(map[string]string{other: "theirs"}))

		By("the status too: the conditions list is written whole")
		p = teardown.NewClusterPatch(k8s, getClusterNow(name))
		byAnother(func(mc *unstructured.Unstructured) { mc.SetLabels(map[string]string{"env": "theirs"}) })
		p.SetCondition("Testing", "a step")
		_, _, err = p.Flush(ctx)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "a conflict, not a write: %v", err)
		_, found, _ := unstructured.NestedSlice(getClusterNow(name).Object, "status", "conditions")
		Expect(found).To(BeFalse())
	})

	It("checks, before a force, a cluster it has nothing to write to: one changed since the read is a conflict", func() {
		p := teardown.NewClusterPatch(k8s, getClusterNow(name))
		checked, err := p.FlushForcing(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(checked).To(BeTrue(), "the batch recorded already: an empty patch on the resourceVersion")

		By("a cluster that became available again since the read is not forced on")
		p = teardown.NewClusterPatch(k8s, getClusterNow(name))
		byAnother(func(mc *unstructured.Unstructured) { mc.SetLabels(map[string]string{"env": "theirs"}) })
		_, err = p.FlushForcing(ctx)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "a conflict, so nothing is forced: %v", err)
	})

	It("removes its finalizer and annotations whatever else changed, but not a finalizer moved", func() {
		byAnother(func(mc *unstructured.Unstructured) {
			mc.SetFinalizers(append(mc.GetFinalizers(), held))
			mc.SetAnnotations(map[string]string{other: "theirs", note: "1"})
		})
		p := teardown.NewClusterPatch(k8s, getClusterNow(name))
		byAnother(func(mc *unstructured.Unstructured) { mc.SetLabels(map[string]string{"env": "theirs"}) })
		removed, err := p.RemoveFinalizer(ctx, hold, note)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(BeTrue())
		mc := getClusterNow(name)
		Expect(mc.GetFinalizers()).To(Equal([]string{held}), "another's finalizer kept")
		Expect(mc.GetAnnotations()).To(Equal(map[string]string{other: "theirs"}))
		Expect(mc.GetLabels()).To(HaveKeyWithValue("env", "theirs"))

		By("a finalizer moved since the read is refused")
		p = teardown.NewClusterPatch(k8s, getClusterNow(name))
		byAnother(func(mc *unstructured.Unstructured) { mc.SetFinalizers(append([]string{hold}, mc.GetFinalizers()...)) })
		_, err = p.RemoveFinalizer(ctx, held)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "refused, not removed: %v", err)
		Expect(getClusterNow(name).GetFinalizers()).To(Equal([]string{hold, held}))
	})

	It("removes the last finalizer only while it is the only one: one added since the read is refused", func() {
		p := teardown.NewClusterPatch(k8s, getClusterNow(name))
		byAnother(func(mc *unstructured.Unstructured) { mc.SetFinalizers(append(mc.GetFinalizers(), held)) })
		_, err := p.RemoveLastFinalizer(ctx, hold)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "refused, not removed: %v", err)
		Expect(getClusterNow(name).GetFinalizers()).To(Equal([]string{hold, held}))

		byAnother(func(mc *unstructured.Unstructured) { mc.SetFinalizers([]string{hold}) })
		p = teardown.NewClusterPatch(k8s, getClusterNow(name))
		byAnother(func(mc *unstructured.Unstructured) { mc.SetLabels(map[string]string{"env": "theirs"}) })
		removed, err := p.RemoveLastFinalizer(ctx, hold)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(BeTrue())
		Expect(getClusterNow(name).GetFinalizers()).To(BeEmpty())
	})
})
