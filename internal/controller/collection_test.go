package controller_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetops-dev/cleanup-operator/internal/teardown"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
	"k8s.io/utils/ptr"
)

var manifestWorkGVK = metav1.TypeMeta{APIVersion: "work.open-cluster-management.io/v1", Kind: "ManifestWork"}

// liveWorks are the works of a namespace as the API server has them now.
func liveWorks(namespace string) []metav1.PartialObjectMetadata {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(manifestWorkGVK.GroupVersionKind().GroupVersion().WithKind("ManifestWorkList"))
	Expect(k8s.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	return list.Items
}

// groupOf is a plan's collection of the named works, as they are now.
func groupOf(namespace string, names ...string) []decision.Action {
	var acts []decision.Action
	for _, w := range liveWorks(namespace) {
		for _, n := range names {
			if w.Name == n {
				meta := w.DeepCopy()
				meta.TypeMeta = manifestWorkGVK
				acts = append(acts, decision.Action{Verb: decision.VerbDelete, Resource: "manifestworks.work.open-cluster-management.io",
					Namespace: namespace, Name: w.Name, UID: w.UID, ResourceVersion: w.ResourceVersion, Meta: meta, Collection: true})
			}
		}
	}
	Expect(acts).To(HaveLen(len(names)))
	return acts
}

// deletingWorks are the names of the namespace's works being deleted or gone.
func deletingWorks(namespace string, names ...string) []string {
	var out []string
	for _, n := range names {
		gone := objectGone("ManifestWork", namespace, n)()
		if !gone {
			for _, w := range liveWorks(namespace) {
				if w.Name == n && w.DeletionTimestamp != nil {
					gone = true
				}
			}
		}
		if gone {
			out = append(out, n)
		}
	}
	return out
}

// auditVerbs counts the successful writes of a verb to the works of a namespace.
func auditVerbs(namespace, verb string) int {
	events, err := testenv.ReadAuditLog(auditLog)
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, e := range events {
		if e.Stage == "ResponseComplete" && e.Verb == verb && e.ObjectRef.Resource == "manifestworks" && e.ObjectRef.Namespace == namespace &&
			e.ResponseStatus.Code < 300 {
			n++
		}
	}
	return n
}

// auditWrites are the successful deletes and deletecollections of the
// works of a namespace, in the order the audit log has them (the deletes of
// one group sorted by name).
func auditWrites(namespace string) []string {
	events, err := testenv.ReadAuditLog(auditLog)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range events {
		if e.Stage == "ResponseComplete" && (e.Verb == "delete" || e.Verb == "deletecollection") && e.ObjectRef.Resource == "manifestworks" &&
			e.ObjectRef.Namespace == namespace && e.ResponseStatus.Code < 300 {
			out = append(out, e.Verb+" "+e.ObjectRef.Name)
		}
	}
	slices.Sort(out[:min(3, len(out))])
	return out
}

// applied waits until the agent has applied every work of the namespace:
// a work it changes after the plan read it is deleted one by one.
func applied(namespace string, works int) {
	Eventually(func(g Gomega) {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(manifestWorkGVK.APIVersion)
		list.SetKind("ManifestWorkList")
		g.Expect(k8s.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(works))
		for _, w := range list.Items {
			conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
			g.Expect(conds).NotTo(BeEmpty(), "work %s not applied yet", w.GetName())
		}
	}).Should(Succeed())
}

// labelDeleting puts the deleting label on the namespace, and waits until
// the API server refuses a new work there (a dry run).
func labelDeleting(namespace string) {
	ns := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: namespace}, ns)).To(Succeed())
	before := ns.DeepCopy()
	ns.Labels = map[string]string{v1alpha1.ClusterDeletingLabel: "true"}
	Expect(k8s.Patch(ctx, ns, client.MergeFrom(before))).To(Succeed())
	Eventually(func() error { return newWork(namespace, "probe", client.DryRunAll) }).Should(Satisfy(apierrors.IsForbidden))
}

// newWork creates a work, and says how the API server answered.
func newWork(namespace, name string, opts ...client.CreateOption) error {
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": manifestWorkGVK.APIVersion, "kind": manifestWorkGVK.Kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"workload": map[string]any{}},
	}}
	return k8s.Create(ctx, w, opts...)
}

// settled waits until the admission policy and its binding have been as
// they are for the operator's settle time.
func settled() { settledFor(teardown.AdmissionSettle + time.Second) }

// settledFor waits until neither has been written for d.
func settledFor(d time.Duration) {
	Eventually(func(g Gomega) {
		objs := []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}}
		keys := []string{admissionpolicy.DeletingClusterPolicy, admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy)}
		for i, obj := range objs {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: keys[i]}, obj)).To(Succeed())
			g.Expect(time.Since(teardown.LastWritten(obj))).To(BeNumerically(">", d), keys[i])
		}
	}).Should(Succeed())
}

// withGVK gives the object the kind of a work.
func withGVK(w *unstructured.Unstructured) *unstructured.Unstructured {
	w.SetAPIVersion(manifestWorkGVK.APIVersion)
	w.SetKind(manifestWorkGVK.Kind)
	return w
}

var _ = Describe("Deleting a group in one request", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	// The namespace is not labelled here, so that the spec can create works
	// in it; labelDeleting labels it, as the signal step does. The
	// admission policy exists (the operator created it). The agent leaves
	// its works alone: a work it changes is no longer the one the plan
	// decided on.
	newNamespace := func(name string) (*unstructured.Unstructured, *decision.Plan) {
		agent.setStopped(name, true)
		DeferCleanup(func() { agent.setStopped(name, false) })
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		mc := managedCluster(name, nil)
		plan := &decision.Plan{Cluster: name, Steps: []decision.Step{{Kind: decision.StepSignal, Name: "cleanup-signal"}}}
		return mc, plan
	}
	signalWork := func(namespace string) {
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": "cleanup-signal", "namespace": namespace,
				"labels": map[string]any{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy}},
			"spec": map[string]any{"workload": map[string]any{}},
		}}
		Expect(k8s.Create(ctx, w)).To(Succeed())
	}

	It("deletes the snapshot it checked: not a work that appears after, nor the signal work", func() {
		mc, plan := newNamespace("coll-1")
		for i := range 5 {
			work("coll-1", fmt.Sprintf("w-%d", i), nil)
		}
		signalWork("coll-1")
		acts := groupOf("coll-1", "w-0", "w-1", "w-2", "w-3", "w-4")
		labelDeleting("coll-1")
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, 0, func() {
			// Between the check and the request: refused.
			Expect(newWork("coll-1", "late")).To(Satisfy(apierrors.IsForbidden))
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(newWork("coll-1", "late", client.DryRunAll)).To(Satisfy(apierrors.IsForbidden))
		Expect(deletingWorks("coll-1", "w-0", "w-1", "w-2", "w-3", "w-4", "cleanup-signal")).To(
			Equal([]string{"w-0", "w-1", "w-2", "w-3", "w-4"}))
		Expect(auditVerbs("coll-1", "deletecollection")).To(Equal(1))
		Expect(auditVerbs("coll-1", "delete")).To(Equal(0))
	})

	It("leaves out by name a work the plan does not hold, even one changed after the check", func() {
		mc, plan := newNamespace("coll-2")
		for i := range 3 {
			work("coll-2", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-2", "w-0", "w-1", "w-2")
		// Appeared after the plan, before the check; or kept, held, of a
		// later group or stage: not in the plan's group either way.
		work("coll-2", "kept", nil)
		labelDeleting("coll-2")
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, 0, func() {
			w := getWork(Default, "coll-2", "kept")
			before := w.DeepCopy()
			w.SetLabels(map[string]string{"changed": "yes"})
			Expect(k8s.Patch(ctx, w, client.MergeFrom(before))).To(Succeed())
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(deletingWorks("coll-2", "w-0", "w-1", "w-2", "kept")).To(Equal([]string{"w-0", "w-1", "w-2"}))
		Expect(auditVerbs("coll-2", "deletecollection")).To(Equal(1))
	})

	It("leaves the collection to one-by-one deletes when it would leave out more objects than it may", func() {
		mc, plan := newNamespace("coll-many")
		for i := range 4 {
			work("coll-many", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-many", "w-0", "w-1")
		labelDeleting("coll-many")
		ok, err := teardown.DeleteCollectionLeavingOut(ctx, k8s, k8s, mc, plan, acts, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse())
		Expect(deletingWorks("coll-many", "w-0", "w-1", "w-2", "w-3")).To(BeEmpty())
		Expect(auditVerbs("coll-many", "deletecollection")).To(Equal(0))

		ok, err = teardown.DeleteCollectionLeavingOut(ctx, k8s, k8s, mc, plan, acts, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(deletingWorks("coll-many", "w-0", "w-1", "w-2", "w-3")).To(Equal([]string{"w-0", "w-1"}))
	})

	It("leaves the collection to one-by-one deletes when a work changed since the plan", func() {
		mc, plan := newNamespace("coll-3")
		for i := range 3 {
			work("coll-3", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-3", "w-0", "w-1", "w-2")
		w := getWork(Default, "coll-3", "w-1")
		before := w.DeepCopy()
		w.SetLabels(map[string]string{"changed": "yes"})
		Expect(k8s.Patch(ctx, w, client.MergeFrom(before))).To(Succeed())
		labelDeleting("coll-3")
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, 0, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse())
		Expect(deletingWorks("coll-3", "w-0", "w-1", "w-2")).To(BeEmpty())
	})

	It("leaves the collection to one-by-one deletes when the namespace, read live, does not carry the deleting label", func() {
		mc, plan := newNamespace("coll-nolabel")
		for i := range 3 {
			work("coll-nolabel", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-nolabel", "w-0", "w-1", "w-2")
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, 0, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse())
		Expect(deletingWorks("coll-nolabel", "w-0", "w-1", "w-2")).To(BeEmpty())
		Expect(auditVerbs("coll-nolabel", "deletecollection")).To(Equal(0))
	})

	It("leaves the collection to one-by-one deletes while the admission policy is younger than the settle time", func() {
		mc, plan := newNamespace("coll-young")
		for i := range 3 {
			work("coll-young", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-young", "w-0", "w-1", "w-2")
		labelDeleting("coll-young")
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, 24*time.Hour, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse())
		Expect(deletingWorks("coll-young", "w-0", "w-1", "w-2")).To(BeEmpty())
	})

	for i, edit := range []struct {
		what string
		obj  client.Object
		set  func(client.Object)
	}{
		{"the policy no longer refuses new add-ons", &admissionregistrationv1.ValidatingAdmissionPolicy{}, func(o client.Object) {
			p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
			p.Spec.MatchConstraints.ResourceRules = p.Spec.MatchConstraints.ResourceRules[:1]
		}},
		{"the policy gained a match condition", &admissionregistrationv1.ValidatingAdmissionPolicy{}, func(o client.Object) {
			p := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
			p.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "narrow", Expression: "object.metadata.name != 'w-1'"}}
		}},
		{"the binding only warns", &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, func(o client.Object) {
			o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.ValidationActions = []admissionregistrationv1.ValidationAction{
				admissionregistrationv1.Warn}
		}},
		{"the binding matches fewer namespaces", &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, func(o client.Object) {
			o.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.MatchResources = &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"guarded": "yes"}}}
		}},
	} {
		It("leaves the collection to one-by-one deletes when an administrator changed the admission policy: "+edit.what, func() {
			namespace := fmt.Sprintf("coll-edit-%d", i)
			mc, plan := newNamespace(namespace)
			for i := range 3 {
				work(namespace, fmt.Sprintf("w-%d", i), nil)
			}
			acts := groupOf(namespace, "w-0", "w-1", "w-2")
			labelDeleting(namespace)
			name := admissionpolicy.DeletingClusterPolicy
			if _, ok := edit.obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
				name = admissionpolicy.BindingName(name)
			}
			settledFor(3 * time.Second)
			Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, edit.obj)).To(Succeed())
			original := edit.obj.DeepCopyObject().(client.Object)
			edit.set(edit.obj)
			Expect(k8s.Update(ctx, edit.obj)).To(Succeed())
			edited := teardown.LastWritten(edit.obj)
			DeferCleanup(func() {
				Eventually(func() error {
					current := original.DeepCopyObject().(client.Object)
					if err := k8s.Get(ctx, client.ObjectKey{Name: name}, current); err != nil {
						return err
					}
					restored := original.DeepCopyObject().(client.Object)
					restored.SetResourceVersion(current.GetResourceVersion())
					return k8s.Update(ctx, restored)
				}).Should(Succeed())
			})
			// The operator's guard puts the edited object back within moments;
			// what it wrote stays unsettled for AdmissionSettle, so the
			// collection is refused whether the edit or the restore is seen.
			ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, teardown.AdmissionSettle, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeFalse())
			Expect(deletingWorks(namespace, "w-0", "w-1", "w-2")).To(BeEmpty())

			// Once put back, the object is as the operator renders it, and a
			// restore that only removed what the edit added still counts as
			// a write, which the settle runs from: an API server may enforce
			// the edit until its watch brings the restore. Nothing was
			// written for 3 s before the edit.
			Eventually(func(g Gomega) {
				current := original.DeepCopyObject().(client.Object)
				g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, current)).To(Succeed())
				g.Expect(specOf(current)).To(Equal(specOf(original)), "the guard puts the object back")
				g.Expect(teardown.LastWritten(current)).To(BeTemporally(">=", edited), "the restore is a write")
			}).Should(Succeed())
		})
	}

	// The API server deletes each object of the snapshot by name, without
	// the plan's UID or resourceVersion (Store.DeleteCollection): what is
	// at a name when the server gets to it is deleted. The namespace's
	// label and the admission policy keep a name from being re-created
	// meanwhile. The specs above edit the policy and put it back: as the
	// operator does, this one waits until the policy has settled, so that
	// the API server enforces the policy as it is (an edit it still
	// enforced let w-1 through, and only w-1).
	It("does not delete a work re-created under a planned name after the check: the namespace refuses it", func() {
		mc, plan := newNamespace("coll-recreate")
		for i := range 3 {
			work("coll-recreate", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-recreate", "w-0", "w-1", "w-2")
		labelDeleting("coll-recreate")
		settled()
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, teardown.AdmissionSettle, func() {
			old := getWork(Default, "coll-recreate", "w-1")
			Expect(k8s.Delete(ctx, old)).To(Succeed())
			if old = (&unstructured.Unstructured{}); k8s.Get(ctx, client.ObjectKey{Namespace: "coll-recreate", Name: "w-1"}, withGVK(old)) == nil {
				before := old.DeepCopy()
				old.SetFinalizers(nil)
				Expect(k8s.Patch(ctx, old, client.MergeFrom(before))).To(Succeed())
			}
			Eventually(objectGone("ManifestWork", "coll-recreate", "w-1")).Should(BeTrue())
			Expect(newWork("coll-recreate", "w-1")).To(Satisfy(apierrors.IsForbidden))
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(objectGone("ManifestWork", "coll-recreate", "w-1")()).To(BeTrue(), "no work was re-created under w-1")
		Expect(deletingWorks("coll-recreate", "w-0", "w-1", "w-2")).To(Equal([]string{"w-0", "w-1", "w-2"}))
	})

	It("asks the API server again whether the namespace is closed once the namespace was written", func() {
		mc, _ := newNamespace("coll-reprobe")
		labelDeleting("coll-reprobe")
		settled()
		probes := func() int {
			events, err := testenv.ReadAuditLog(auditLog)
			Expect(err).NotTo(HaveOccurred())
			n := 0
			for _, e := range events {
				if e.Stage == "ResponseComplete" && e.Verb == "create" && e.ObjectRef.Namespace == "coll-reprobe" &&
					e.ObjectRef.Name == teardown.AdmissionProbe {
					n++
				}
			}
			return n
		}
		closed := teardown.NamespaceClosed(k8s, k8s, mc, teardown.AdmissionSettle)
		Expect(closed(ctx)).To(BeTrue())
		Expect(closed(ctx)).To(BeTrue())
		Eventually(probes).Should(Equal(1), "the namespace unchanged: one dry run")

		// Relabelled: the deleting label removed and put back.
		ns := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "coll-reprobe"}, ns)).To(Succeed())
		before := ns.DeepCopy()
		delete(ns.Labels, v1alpha1.ClusterDeletingLabel)
		Expect(k8s.Patch(ctx, ns, client.MergeFrom(before))).To(Succeed())
		Expect(closed(ctx)).To(BeFalse(), "the live namespace has no deleting label")
		labelDeleting("coll-reprobe")
		Expect(closed(ctx)).To(BeTrue())
		Eventually(probes).Should(BeNumerically(">=", 2), "the namespace written since: a new dry run")

		// The binding written, its spec as the operator renders it (so the
		// guard writes nothing): once settled, a new dry run, since a
		// write that put it back may leave no trace the settle sees.
		n := probes()
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy)}, binding)).To(Succeed())
		old := binding.DeepCopy()
		binding.SetAnnotations(map[string]string{"test.cleanup.fleetops.dev/reprobe": "yes"})
		Expect(k8s.Patch(ctx, binding, client.MergeFrom(old))).To(Succeed())
		Expect(closed(ctx)).To(BeFalse(), "the binding was written less than AdmissionSettle ago")
		settled()
		Expect(closed(ctx)).To(BeTrue())
		Eventually(probes).Should(BeNumerically(">", n), "the binding written since: a new dry run")
	})

	// What remains: a work of the snapshot changed (not re-created)
	// after the check is deleted as the plan decided. A cleanup-priority
	// only orders the deletes of the stage, whose group was every work
	// that remained: the work is deleted in the stage that was deleting
	// it, before the order its new priority would give (docs/developer/design.md,
	// "One request for a group").
	It("deletes a work whose cleanup-priority changed after the check with the stage's group, as the plan decided", func() {
		mc, plan := newNamespace("coll-changed")
		for i := range 3 {
			work("coll-changed", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-changed", "w-0", "w-1", "w-2")
		labelDeleting("coll-changed")
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, 0, func() {
			w := getWork(Default, "coll-changed", "w-2")
			before := w.DeepCopy()
			w.SetAnnotations(map[string]string{"open-cluster-management.io/cleanup-priority": "90"})
			Expect(k8s.Patch(ctx, w, client.MergeFrom(before))).To(Succeed())
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(deletingWorks("coll-changed", "w-0", "w-1", "w-2")).To(Equal([]string{"w-0", "w-1", "w-2"}))
		Expect(auditVerbs("coll-changed", "deletecollection")).To(Equal(1))
	})

	// A group before others: a work of the group written a later
	// priority in the window goes with the group, one of the later group
	// written an earlier priority is left out by name, as the plan decided.
	It("deletes a group as checked when priorities change in the request's window: the group's work goes, the later group's stays", func() {
		mc, plan := newNamespace("coll-reprio")
		for i := range 3 {
			work("coll-reprio", fmt.Sprintf("w-%d", i), nil)
		}
		work("coll-reprio", "last", map[string]string{"open-cluster-management.io/cleanup-priority": "100"})
		acts := groupOf("coll-reprio", "w-0", "w-1", "w-2")
		labelDeleting("coll-reprio")
		ok, err := teardown.DeleteCollection(ctx, k8s, k8s, mc, plan, acts, 0, func() {
			for name, prio := range map[string]string{"w-2": "200", "last": "0"} {
				w := getWork(Default, "coll-reprio", name)
				before := w.DeepCopy()
				w.SetAnnotations(map[string]string{"open-cluster-management.io/cleanup-priority": prio})
				Expect(k8s.Patch(ctx, w, client.MergeFrom(before))).To(Succeed())
			}
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(deletingWorks("coll-reprio", "w-0", "w-1", "w-2", "last")).To(Equal([]string{"w-0", "w-1", "w-2"}))
	})

	// A proxy in front of the API server refuses a long request line: the
	// group goes one by one, the work left out still left alone.
	It("deletes one by one when a proxy refuses the deletecollection as too long", func() {
		mc, plan := newNamespace("coll-414")
		for i := range 3 {
			work("coll-414", fmt.Sprintf("w-%d", i), nil)
		}
		work("coll-414", "kept", nil)
		acts := groupOf("coll-414", "w-0", "w-1", "w-2")
		labelDeleting("coll-414")
		short := throughProxy(func(w http.ResponseWriter, r *http.Request, forward http.HandlerFunc) {
			if r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/manifestworks") && strings.Contains(r.URL.RawQuery, "kept") {
				http.Error(w, "request URI too long", http.StatusRequestURITooLong)
				return
			}
			forward(w, r)
		})
		m := metrics.NewMetrics()
		done, err := teardown.DeleteAll(ctx, short, short, mc, plan, acts, m)
		Expect(err).NotTo(HaveOccurred())
		Expect(done).To(HaveLen(3))
		Expect(testutil.ToFloat64(m.DeletedObjects.WithLabelValues("manifestworks"))).To(Equal(3.0))
		Expect(deletingWorks("coll-414", "w-0", "w-1", "w-2", "kept")).To(Equal([]string{"w-0", "w-1", "w-2"}))
		Expect(auditVerbs("coll-414", "deletecollection")).To(Equal(0))
		Expect(auditVerbs("coll-414", "delete")).To(Equal(3))
	})

	// The API server deleted the collection, and the answer was lost on
	// the way back: what it deleted is recorded, once, and the error said.
	It("records what a deletecollection deleted when its answer is lost", func() {
		mc, plan := newNamespace("coll-lost")
		for i := range 5 {
			work("coll-lost", fmt.Sprintf("w-%d", i), nil)
		}
		acts := groupOf("coll-lost", "w-0", "w-1", "w-2", "w-3", "w-4")
		labelDeleting("coll-lost")
		lossy := throughProxy(func(w http.ResponseWriter, r *http.Request, forward http.HandlerFunc) {
			if r.Method != http.MethodDelete || !strings.HasSuffix(r.URL.Path, "/manifestworks") {
				forward(w, r)
				return
			}
			forward(httptest.NewRecorder(), r)
			http.Error(w, "the connection to the API server was lost", http.StatusBadGateway)
		})

		m := metrics.NewMetrics()
		done, err := teardown.DeleteAll(ctx, lossy, lossy, mc, plan, acts, m)
		Expect(err).To(MatchError(ContainSubstring("the connection to the API server was lost")))
		Expect(done).To(HaveLen(5), "each work the server deleted, being deleted now")
		Expect(testutil.ToFloat64(m.DeletedObjects.WithLabelValues("manifestworks"))).To(Equal(5.0))
		Expect(deletingWorks("coll-lost", "w-0", "w-1", "w-2", "w-3", "w-4")).To(HaveLen(5))
		Expect(auditVerbs("coll-lost", "deletecollection")).To(Equal(1))
		Expect(auditVerbs("coll-lost", "delete")).To(Equal(0))
	})

	It("tears down a cluster's works in one deletecollection; the signal work alone", func() {
		const cluster = "coll-4"
		fleetCluster(cluster, map[string]string{"env": "coll-4"}, true)
		for i := range 8 {
			work(cluster, fmt.Sprintf("w-%d", i), nil)
		}
		Expect(k8s.Create(ctx, cleanupPolicy("coll-4", v1alpha1.CleanupPolicySpec{
			ClusterSelector: "cluster.metadata.labels[?'env'].orValue('') == 'coll-4'",
			DeletionSignal:  &v1alpha1.DeletionSignal{},
		}))).To(Succeed())
		governedBy(cluster, "coll-4")
		Eventually(func() bool { return objectGone("ManifestWork", cluster, "cleanup-signal")() }).Should(BeFalse())
		applied(cluster, 9)
		settled()

		deleteCluster(cluster)
		clusterGone(cluster)
		Expect(auditVerbs(cluster, "deletecollection")).To(Equal(1))
		Expect(auditVerbs(cluster, "delete")).To(Equal(1), "the signal work's delete")
	})

	It("asks the API server once per teardown whether the namespace is closed: two groups, one dry run", func() {
		const cluster = "coll-probe"
		fleetCluster(cluster, map[string]string{"env": cluster}, true)
		addon(cluster, "search")
		addon(cluster, "policy")
		for i := range 3 {
			work(cluster, fmt.Sprintf("w-%d", i), nil)
		}
		Expect(k8s.Create(ctx, cleanupPolicy(cluster, v1alpha1.CleanupPolicySpec{
			ClusterSelector: fmt.Sprintf("cluster.metadata.labels[?'env'].orValue('') == '%s'", cluster),
			DeletionStages: []v1alpha1.DeletionStage{
				{Name: "addons", GroupVersionResource: v1alpha1.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}},
				{Name: "works", GroupVersionResource: gvrWorks()},
			},
		}))).To(Succeed())
		governedBy(cluster, cluster)
		applied(cluster, 3)
		settled()

		deleteCluster(cluster)
		clusterGone(cluster)
		events, err := testenv.ReadAuditLog(auditLog)
		Expect(err).NotTo(HaveOccurred())
		var collections, probes int
		for _, e := range events {
			if e.Stage != "ResponseComplete" || e.ObjectRef.Namespace != cluster {
				continue
			}
			switch {
			case e.Verb == "deletecollection" && e.ResponseStatus.Code < 300:
				collections++
			case e.Verb == "create" && e.ObjectRef.Resource == "manifestworks" && e.ObjectRef.Name == teardown.AdmissionProbe:
				probes++
			}
		}
		Expect(collections).To(Equal(2), "the add-ons and the works, each in one request")
		Expect(probes).To(Equal(1), "the namespace was not written between the two groups")
	})

	for _, strategy := range []v1alpha1.RemoveStrategyType{v1alpha1.RemoveStrategyRequired, v1alpha1.RemoveStrategyBestEffort} {
		It("deletes each group of a cleanup-priority split in one request, the later group left out by name, under "+string(strategy), func() {
			cluster := "coll-split-" + map[v1alpha1.RemoveStrategyType]string{v1alpha1.RemoveStrategyRequired: "r", v1alpha1.RemoveStrategyBestEffort: "b"}[strategy]
			fleetCluster(cluster, map[string]string{"env": cluster}, true)
			for i := range 3 {
				work(cluster, fmt.Sprintf("first-%d", i), map[string]string{"open-cluster-management.io/cleanup-priority": "10"})
				work(cluster, fmt.Sprintf("then-%d", i), map[string]string{"open-cluster-management.io/cleanup-priority": "20"})
			}
			Expect(k8s.Create(ctx, cleanupPolicy(cluster, v1alpha1.CleanupPolicySpec{
				ClusterSelector: fmt.Sprintf("cluster.metadata.labels[?'env'].orValue('') == '%s'", cluster),
				RemoveStrategy:  v1alpha1.RemoveStrategy{Default: strategy},
			}))).To(Succeed())
			governedBy(cluster, cluster)
			applied(cluster, 6)
			settled()

			deleteCluster(cluster)
			clusterGone(cluster)
			// The first group in one request that leaves the last out; the
			// last one, all that remains, in one request after it.
			Expect(auditWrites(cluster)).To(Equal([]string{"deletecollection ", "deletecollection "}))
		})
	}

	It("deletes a stage whose when reads only names in one request, the work it keeps for a later stage left out", func() {
		const cluster = "coll-when"
		fleetCluster(cluster, map[string]string{"env": cluster}, true)
		for i := range 3 {
			work(cluster, fmt.Sprintf("app-%d", i), nil)
		}
		work(cluster, "klusterlet-work", nil)
		Expect(k8s.Create(ctx, cleanupPolicy(cluster, v1alpha1.CleanupPolicySpec{
			ClusterSelector: fmt.Sprintf("cluster.metadata.labels[?'env'].orValue('') == '%s'", cluster),
			DeletionStages: []v1alpha1.DeletionStage{
				{Name: "apps", GroupVersionResource: gvrWorks(), When: "object.metadata.name != 'klusterlet-work'"},
				{Name: "klusterlet", GroupVersionResource: gvrWorks()},
			},
		}))).To(Succeed())
		governedBy(cluster, cluster)
		applied(cluster, 4)
		settled()

		deleteCluster(cluster)
		clusterGone(cluster)
		Expect(auditWrites(cluster)).To(ConsistOf("deletecollection ", "delete klusterlet-work"))
	})
})

var _ = Describe("A deletecollection refused part way", func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(30 * time.Second)
		SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	})
	AfterEach(deleteAll)

	It("does not delete again, nor count twice, the add-ons it deleted already", func() {
		const ns = "coll-partial"
		const hold = "test.fleetops.dev/hold"
		agent.setStopped(ns, true)
		DeferCleanup(func() { agent.setStopped(ns, false) })
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		addonGVK := metav1.TypeMeta{APIVersion: "addon.open-cluster-management.io/v1alpha1", Kind: "ManagedClusterAddOn"}
		var acts []decision.Action
		for i := range 3 {
			name := fmt.Sprintf("a-%d", i)
			addon(ns, name)
			a := &unstructured.Unstructured{}
			a.SetAPIVersion(addonGVK.APIVersion)
			a.SetKind(addonGVK.Kind)
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a)).To(Succeed())
			before := a.DeepCopy()
			a.SetFinalizers([]string{hold})
			Expect(k8s.Patch(ctx, a, client.MergeFrom(before))).To(Succeed())
			meta := &metav1.PartialObjectMetadata{TypeMeta: addonGVK, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				UID: a.GetUID(), ResourceVersion: a.GetResourceVersion()}}
			acts = append(acts, decision.Action{Verb: decision.VerbDelete, Resource: "managedclusteraddons.addon.open-cluster-management.io",
				Namespace: ns, Name: name, UID: a.GetUID(), Meta: meta, Collection: true})
			DeferCleanup(func() {
				a := &unstructured.Unstructured{}
				a.SetAPIVersion(addonGVK.APIVersion)
				a.SetKind(addonGVK.Kind)
				if k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a) == nil {
					before := a.DeepCopy()
					a.SetFinalizers(nil)
					Expect(client.IgnoreNotFound(k8s.Patch(ctx, a, client.MergeFrom(before)))).To(Succeed())
				}
			})
		}
		// An administrator's policy refuses to delete a-2: the collection
		// deletes a-0 and a-1, then stops.
		refuseAdmission("test-refuse-addon-delete", admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"addon.open-cluster-management.io"}, APIVersions: []string{"v1alpha1"},
				Resources: []string{"managedclusteraddons"}}},
			admissionregistrationv1.Validation{Expression: "oldObject.metadata.name != 'a-2'", Reason: ptr.To(metav1.StatusReasonForbidden)},
			admissionregistrationv1.MatchCondition{Name: "ns", Expression: "request.namespace == '" + ns + "'"})
		Eventually(func() error {
			a := &unstructured.Unstructured{}
			a.SetAPIVersion(addonGVK.APIVersion)
			a.SetKind(addonGVK.Kind)
			a.SetNamespace(ns)
			a.SetName("a-2")
			return k8s.Delete(ctx, a, client.DryRunAll)
		}).Should(Satisfy(apierrors.IsForbidden))
		labelDeleting(ns)
		settled()

		mc := managedCluster(ns, nil)
		plan := &decision.Plan{Cluster: ns, Steps: []decision.Step{{Kind: decision.StepSignal, Name: "cleanup-signal"}}}
		m := metrics.NewMetrics()
		done, err := teardown.DeleteAll(ctx, k8s, k8s, mc, plan, acts, m)
		Expect(err).To(Satisfy(apierrors.IsForbidden), "a-2's own delete is refused too")
		Expect(done).To(ConsistOf(acts[0].UID, acts[1].UID))
		Expect(testutil.ToFloat64(m.DeletedObjects.WithLabelValues("managedclusteraddons"))).To(Equal(2.0))

		events, err := testenv.ReadAuditLog(auditLog)
		Expect(err).NotTo(HaveOccurred())
		var writes []string
		for _, e := range events {
			if e.Stage == "ResponseComplete" && (e.Verb == "delete" || e.Verb == "deletecollection") &&
				e.ObjectRef.Resource == "managedclusteraddons" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name != "a-2" {
				writes = append(writes, fmt.Sprintf("%s %s %d", e.Verb, e.ObjectRef.Name, e.ResponseStatus.Code))
			}
		}
		Expect(writes).To(Equal([]string{"deletecollection  403"}), "no second delete of a-0 or a-1")
	})
})

// throughProxy is a client of the API server through a proxy that hands
// each request to handle, with the function that forwards it.
func throughProxy(handle func(w http.ResponseWriter, r *http.Request, forward http.HandlerFunc)) client.Client {
	transport, err := rest.TransportFor(env.Config)
	Expect(err).NotTo(HaveOccurred())
	target, err := url.Parse(env.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(w, r, proxy.ServeHTTP)
	}))
	DeferCleanup(srv.Close)
	c, err := client.New(&rest.Config{Host: srv.URL}, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// specOf is the spec of an admission policy or binding.
func specOf(obj client.Object) any {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		return o.Spec
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		return o.Spec
	}
	return nil
}
