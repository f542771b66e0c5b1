package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestMain stops the API server the tests share (sharedHub) once every
// test ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.hub != nil {
		if err := shared.hub.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the shared API server:", err)
		}
	}
	os.Exit(code)
}

// shared is the hub of the package's tests, once started.
var shared struct {
	once sync.Once
	hub  *testHub
	err  error
}

// testHub is the shared API server, and what resetting it needs.
type testHub struct {
	env   *testenv.Env
	admin client.Client
	// initial holds the UIDs of the objects of sweptKinds the hub held once
	// started: the API server's own, which a reset leaves.
	initial map[types.UID]bool
	// webhooks are the webhook configurations envtest installed, which
	// some tests delete.
	webhooks []admissionregistrationv1.ValidatingWebhookConfiguration
	// namespaced are the namespaced kinds the API server serves, which a
	// namespace must be emptied of before it goes.
	namespaced []schema.GroupVersionKind
}

// sweptKinds are the kinds of what the tests, the operator and the plugin
// create, in the order a reset deletes them: the admission policies first,
// as they refuse some of the changes after. Events are left where no
// namespace goes with them: nothing the tests run reads them.
var sweptKinds = []schema.GroupVersionKind{
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	managedClusterGVK,
	cleanupPolicyGVK,
	manifestWorkGVK,
	{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Kind: "ManagedClusterAddOn"},
	configurationPolicyGVK,
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	namespaceGVK,
}

// sharedHub returns the API server the package's tests share, started by
// the first to ask for it, and an administrator's client. Each test starts
// and stops the operator it needs. The plugin's commands read the whole hub,
// so each test starts from a hub that holds only what the API server started
// with, and leaves it so: when the test ends, after the cleanups it
// registered later (its operator's stop among them), the hub is reset. It
// is reset before the test too, should the test before have failed to.
func sharedHub(t *testing.T) (*testenv.Env, client.Client) {
	t.Helper()
	shared.once.Do(func() { shared.hub, shared.err = startTestHub() })
	if shared.err != nil {
		t.Fatalf("starting the shared API server: %v", shared.err)
	}
	h := shared.hub
	h.reset(context.Background(), NewWithT(t))
	t.Cleanup(func() { h.reset(context.Background(), NewWithT(t)) })
	return h.env, h.admin
}

// startTestHub starts the API server and notes what it holds then.
func startTestHub() (h *testHub, err error) {
	h = &testHub{}
	if h.env, err = testenv.Start(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = h.env.Stop()
		}
	}()
	ctx := context.Background()
	if h.admin, err = client.New(h.env.Config, client.Options{Scheme: operator.NewScheme()}); err != nil {
		return nil, err
	}
	if h.namespaced, err = namespacedKinds(h.env); err != nil {
		return nil, err
	}
	var hooks admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := h.admin.List(ctx, &hooks); err != nil {
		return nil, err
	}
	h.webhooks = hooks.Items
	objs, err := h.objects(ctx)
	if err != nil {
		return nil, err
	}
	h.initial = map[types.UID]bool{}
	for _, obj := range objs {
		h.initial[obj.UID] = true
	}
	return h, nil
}

// namespacedKinds lists the namespaced kinds the API server serves whose
// objects can be listed and deleted.
func namespacedKinds(env *testenv.Env) ([]schema.GroupVersionKind, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	lists, err := discovery.ServerPreferredNamespacedResources(dc)
	if err != nil {
		return nil, err
	}
	var kinds []schema.GroupVersionKind
	for _, l := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "delete"}}, lists) {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			kinds = append(kinds, gv.WithKind(r.Kind))
		}
	}
	return kinds, nil
}

// reset returns the hub to the state it started in: it deletes every object
// of sweptKinds it did not hold then, its finalizers removed, waits until
// they are gone, and re-creates the webhook configurations envtest
// installed. No operator runs by then: the webhook configurations are
// deleted while CleanupPolicies lose their finalizers, an update no webhook
// server is there to review.
func (h *testHub) reset(ctx context.Context, g Gomega) {
	left, err := h.leftovers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	if slices.ContainsFunc(left, isHeldPolicy) {
		deleteWebhookConfigurations(ctx, g, h.admin)
	}
	g.Eventually(func(g Gomega) {
		left, err := h.leftovers(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		var errs []error
		for _, obj := range left {
			errs = append(errs, h.remove(ctx, obj))
		}
		g.Expect(errors.Join(errs...)).NotTo(HaveOccurred())
		g.Expect(describe(left)).To(BeEmpty(), "still on the hub")
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	h.restoreWebhooks(ctx, g)
}

// remove removes an object's finalizers and deletes it; a namespace, once
// emptied.
func (h *testHub) remove(ctx context.Context, obj *metav1.PartialObjectMetadata) error {
	if err := removeObject(ctx, h.admin, obj); err != nil || obj.GroupVersionKind() != namespaceGVK {
		return err
	}
	return h.emptyNamespace(ctx, obj.Name)
}

// emptyNamespace does for a namespace being deleted what the namespace
// controller, which envtest does not run, would do: it deletes every object
// in it, of each namespaced kind, its finalizers removed, and once none is
// left, finalizes the namespace, which lets the API server remove it.
func (h *testHub) emptyNamespace(ctx context.Context, name string) error {
	left := 0
	for _, gvk := range h.namespaced {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := h.admin.List(ctx, list, client.InNamespace(name)); err != nil {
			return fmt.Errorf("listing %s in namespace %s: %w", gvk.Kind, name, err)
		}
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(gvk)
			if err := removeObject(ctx, h.admin, &list.Items[i]); err != nil {
				return err
			}
		}
		left += len(list.Items)
	}
	if left > 0 {
		return fmt.Errorf("namespace %s: %d object(s) being deleted", name, left)
	}
	ns := &corev1.Namespace{}
	if err := h.admin.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ns.DeletionTimestamp == nil {
		return fmt.Errorf("namespace %s is not being deleted", name)
	}
	ns.Spec.Finalizers = nil
	if err := h.admin.SubResource("finalize").Update(ctx, ns); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("finalizing namespace %s: %w", name, err)
	}
	return nil
}

// objects lists the objects of sweptKinds on the hub, but the API
// server's own (in a kube-* namespace, or named kube-* or system:*), some
// of which appear after it started.
func (h *testHub) objects(ctx context.Context) ([]*metav1.PartialObjectMetadata, error) {
	var objs []*metav1.PartialObjectMetadata
	for _, gvk := range sweptKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := h.admin.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if strings.HasPrefix(obj.Namespace, "kube-") || strings.HasPrefix(obj.Name, "kube-") || strings.HasPrefix(obj.Name, "system:") {
				continue
			}
			obj.SetGroupVersionKind(gvk)
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// leftovers lists the objects of sweptKinds the hub did not hold once
// started.
func (h *testHub) leftovers(ctx context.Context) ([]*metav1.PartialObjectMetadata, error) {
	objs, err := h.objects(ctx)
	return slices.DeleteFunc(objs, func(obj *metav1.PartialObjectMetadata) bool { return h.initial[obj.UID] }), err
}

// restoreWebhooks re-creates the webhook configurations envtest installed
// that are missing.
func (h *testHub) restoreWebhooks(ctx context.Context, g Gomega) {
	var hooks admissionregistrationv1.ValidatingWebhookConfigurationList
	g.Expect(h.admin.List(ctx, &hooks)).To(Succeed())
	missing := slices.DeleteFunc(slices.Clone(h.webhooks), func(want admissionregistrationv1.ValidatingWebhookConfiguration) bool {
		return slices.ContainsFunc(hooks.Items, func(got admissionregistrationv1.ValidatingWebhookConfiguration) bool {
			return got.Name == want.Name
		})
	})
	if len(missing) > 0 {
		restoreWebhookConfigurations(ctx, g, h.admin, missing)
	}
}

// isHeldPolicy says whether obj is a CleanupPolicy with finalizers.
func isHeldPolicy(obj *metav1.PartialObjectMetadata) bool {
	return obj.GroupVersionKind() == cleanupPolicyGVK && len(obj.Finalizers) > 0
}

// removeObject removes an object's finalizers, and deletes it unless it is
// being deleted already.
func removeObject(ctx context.Context, c client.Client, obj *metav1.PartialObjectMetadata) error {
	name := obj.GroupVersionKind().Kind + " " + displayName(obj)
	if len(obj.Finalizers) > 0 {
		err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("%s: removing its finalizers: %w", name, err)
		}
	}
	if obj.DeletionTimestamp != nil {
		return nil
	}
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// describe names each object by its kind, namespace and name.
func describe(objs []*metav1.PartialObjectMetadata) []string {
	out := make([]string, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.GroupVersionKind().Kind+" "+displayName(obj))
	}
	return out
}
