package admissionpolicy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// rights is a set of (verb, group, resource) a test user holds cluster-wide.
type right struct{ verb, group, resource string }

const (
	addOnGroup   = "addon.open-cluster-management.io"
	workGroup    = "work.open-cluster-management.io"
	clusterGroup = "cluster.open-cluster-management.io"
	policyGroup  = "policy.open-cluster-management.io"
)

// teardownRights are what a policy with the default stages, a Required
// strategy, every namespace kept and no prune needs.
var teardownRights = []right{
	{"delete", addOnGroup, "managedclusteraddons"}, {"list", addOnGroup, "managedclusteraddons"},
	{"delete", workGroup, "manifestworks"}, {"list", workGroup, "manifestworks"},
	{"patch", clusterGroup, "managedclusters"}, {"list", clusterGroup, "managedclusters"},
}

// ensureAuthority creates the admission policies, the authority policy
// among those rendered for the operator's user.
func ensureAuthority(ctx context.Context, g *WithT) {
	g.Expect(admissionpolicy.EnsureObjects(ctx, k8s, admissionpolicy.AllObjects(admissionpolicy.DefaultOperatorUser))).To(Succeed())
}

// TestAuthority: without the webhook, a user who may write CleanupPolicies
// is refused each policy that would have the operator exercise a right the
// user lacks, naming it, and the policy is not stored; a user who holds
// the rights succeeds.
func TestAuthority(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	withoutWebhook(ctx, t)
	ensureAuthority(ctx, g)

	editor := userWith(ctx, t, "editor-only")
	partial := userWith(ctx, t, "partial", teardownRights...)
	noClusters := userWith(ctx, t, "no-cluster-patch", teardownRights[:4]...)
	noClusterRead := userWith(ctx, t, "no-cluster-read", teardownRights[:5]...)
	// Over a stage of add-ons only: every right but one the rule needs.
	addOnsAnd := func(name string, more ...right) client.Client {
		return userWith(ctx, t, name, append([]right{{"delete", addOnGroup, "managedclusteraddons"}, {"list", addOnGroup, "managedclusteraddons"},
			{"patch", addOnGroup, "managedclusteraddons"}, {"patch", clusterGroup, "managedclusters"}, {"list", clusterGroup, "managedclusters"}}, more...)...)
	}
	worksUnread := addOnsAnd("works-patched-not-read", right{"patch", workGroup, "manifestworks"})
	worksUnpatched := addOnsAnd("works-read-not-patched", right{"list", workGroup, "manifestworks"})
	pruneUnread := userWith(ctx, t, "prune-unread", append(teardownRights, right{"patch", policyGroup, "configurationpolicies"})...)
	admin := userWith(ctx, t, "fleet-admin", append(teardownRights,
		right{"delete", "", "configmaps"}, right{"list", "", "configmaps"}, right{"patch", "", "configmaps"},
		right{"patch", workGroup, "manifestworks"}, right{"create", workGroup, "manifestworks"},
		right{"delete", "", "namespaces"}, right{"patch", policyGroup, "configurationpolicies"}, right{"list", policyGroup, "configurationpolicies"})...)

	kept := func(more map[string]any) map[string]any {
		spec := map[string]any{"keepNamespace": "true"}
		for k, v := range more {
			spec[k] = v
		}
		return spec
	}
	addOnStage := []any{map[string]any{"name": "addons", "group": addOnGroup, "version": "v1alpha1", "resource": "managedclusteraddons"}}
	configMap := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "signal", "namespace": "default"}}
	refused := []struct {
		name string
		as   client.Client
		spec map[string]any
		want string
	}{
		{"the editor role alone", editor, kept(nil),
			`may not delete managedclusteraddons.addon.open-cluster-management.io in every namespace (verb delete, group "addon.open-cluster-management.io", resource managedclusteraddons), which spec.deletionStages (absent: the default stages)`},
		{"a stage of ConfigMaps", partial, kept(map[string]any{"deletionStages": []any{map[string]any{"name": "cms", "version": "v1", "resource": "configmaps"}}}),
			`may not delete configmaps in every namespace (verb delete, group "", resource configmaps), which spec.deletionStages (stage cms)`},
		{"keepNamespace dropped", partial, map[string]any{},
			`may not delete namespaces in every namespace (verb delete, group "", resource namespaces), which spec.keepNamespace`},
		{"keepNamespace an expression", partial, map[string]any{"keepNamespace": "namespace.metadata.name != 'x'"},
			`(verb delete, group "", resource namespaces)`},
		{"prune DeleteAll", partial, kept(map[string]any{"prune": map[string]any{"default": "DeleteAll"}}),
			`(verb patch, group "policy.open-cluster-management.io", resource configurationpolicies), which spec.prune`},
		{"a prune rule", partial, kept(map[string]any{"prune": map[string]any{"rules": []any{map[string]any{"when": "true", "behavior": "DeleteIfCreated"}}}}),
			`(verb patch, group "policy.open-cluster-management.io", resource configurationpolicies)`},
		{"deletion protection", noClusters, kept(map[string]any{"deletionProtection": "true"}),
			`(verb patch, group "cluster.open-cluster-management.io", resource managedclusters), which spec (every governed cluster`},
		{"no deletion protection either", noClusters, kept(nil),
			`(verb patch, group "cluster.open-cluster-management.io", resource managedclusters)`},
		{"BestEffort with a 1s timeout", partial, kept(map[string]any{"removeStrategy": map[string]any{"default": "BestEffort", "timeout": "1s"}}),
			`(verb patch, group "addon.open-cluster-management.io", resource managedclusteraddons), which spec.deletionStages (absent: the default stages) with a BestEffort or Needless strategy`},
		{"a Needless rule", partial, kept(map[string]any{"removeStrategy": map[string]any{"default": "Required", "rules": []any{map[string]any{"when": "true", "strategy": "Needless"}}}}),
			`(verb patch, group "addon.open-cluster-management.io", resource managedclusteraddons)`},
		{"an orphaning rule", partial, kept(map[string]any{"orphaning": []any{map[string]any{"name": "crds", "when": "manifest.kind == 'CustomResourceDefinition'"}}}),
			`(verb patch, group "work.open-cluster-management.io", resource manifestworks), which spec.orphaning (the operator stamps spec.deleteOption`},
		{"an orphaning rule, works patched but not read", worksUnread, kept(map[string]any{"deletionStages": addOnStage,
			"orphaning": []any{map[string]any{"name": "all", "when": "true"}}}),
			`(verb list, group "work.open-cluster-management.io", resource manifestworks), which spec.orphaning (its rules read every work and its manifests)`},
		{"a Needless strategy over a stage without works", worksUnpatched, kept(map[string]any{"deletionStages": addOnStage,
			"removeStrategy": map[string]any{"default": "Needless"}}),
			`(verb patch, group "work.open-cluster-management.io", resource manifestworks), which spec.removeStrategy (Needless orphans every work`},
		{"a prune rule, ConfigurationPolicies patched but not read", pruneUnread, kept(map[string]any{"prune": map[string]any{"default": "DeleteAll"}}),
			`(verb list, group "policy.open-cluster-management.io", resource configurationpolicies), which spec.prune (its rules read`},
		{"a selector over clusters the author may not read", noClusterRead, kept(nil),
			`(verb list, group "cluster.open-cluster-management.io", resource managedclusters), which spec.clusterSelector`},
		{"a deletion signal", partial, kept(map[string]any{"deletionSignal": map[string]any{"manifests": []any{configMap}}}),
			`(verb create, group "work.open-cluster-management.io", resource manifestworks), which spec.deletionSignal`},
		{"a ClusterRoleBinding signal", admin, map[string]any{"deletionSignal": map[string]any{"manifests": []any{map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "owned"},
			"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}}}}},
			"spec.deletionSignal.manifests[0]: kind rbac.authorization.k8s.io/v1/ClusterRoleBinding is not one the cleanup operator puts on managed clusters; it allows v1/ConfigMap, v1/Secret"},
		{"a DaemonSet signal after a ConfigMap", admin, map[string]any{"deletionSignal": map[string]any{"manifests": []any{configMap, map[string]any{
			"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": map[string]any{"name": "everywhere", "namespace": "kube-system"}}}}},
			"spec.deletionSignal.manifests[1]: kind apps/v1/DaemonSet is not one"},
	}
	for i, c := range refused {
		name := fmt.Sprintf("refused-%d", i)
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Eventually(func() error { return createOnce(ctx, c.as, cleanupPolicy(name, c.spec)) }, enforcementTimeout).
				Should(And(Satisfy(apierrors.IsForbidden), MatchError(ContainSubstring(c.want))))
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, cleanupPolicy(name, nil))).To(Satisfy(apierrors.IsNotFound), "the refused policy is not stored")
		})
	}

	// Holding every right, a fleet administrator writes what each of the
	// others was refused, in one policy.
	full := map[string]any{
		"priority":           int64(100),
		"deletionStages":     []any{map[string]any{"name": "cms", "version": "v1", "resource": "configmaps"}},
		"removeStrategy":     map[string]any{"default": "BestEffort", "timeout": "1s"},
		"prune":              map[string]any{"default": "DeleteAll"},
		"deletionProtection": "true",
		"deletionSignal":     map[string]any{"manifests": []any{configMap}},
	}
	g.Expect(admin.Create(ctx, cleanupPolicy("full", full))).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cleanupPolicy("full", nil)) })

	// Another editor may not change its spec, whatever the change, but may
	// label it.
	stored := cleanupPolicy("full", nil)
	g.Expect(partial.Get(ctx, client.ObjectKey{Name: "full"}, stored)).To(Succeed())
	raised := stored.DeepCopy()
	g.Expect(unstructured.SetNestedField(raised.Object, int64(1000), "spec", "priority")).To(Succeed())
	g.Expect(partial.Update(ctx, raised)).To(MatchError(ContainSubstring(`(verb delete, group "", resource configmaps)`)))
	stored.SetLabels(map[string]string{"team": "fleet"})
	g.Expect(partial.Update(ctx, stored)).To(Succeed())
}

// TestAuthorityToDrop: deleting a CleanupPolicy, removing its in-use
// finalizer or giving it an owner is checked as changing it would be, and a
// change needs the rights of the policy as it stood too: a user who may
// delete policies but lacks a right the policy exercises is refused, naming
// it, narrowed or not, and the policy and its finalizer stay; a user who
// holds the rights deletes it. Its labels still change freely.
func TestAuthorityToDrop(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	withoutWebhook(ctx, t)
	ensureAuthority(ctx, g)

	deleter := userWith(ctx, t, "policy-deleter")
	owner := userWith(ctx, t, "policy-owner", append(teardownRights, right{"delete", "", "namespaces"})...)
	protecting := cleanupPolicy("protecting", map[string]any{"deletionProtection": "true"})
	protecting.SetFinalizers([]string{"cleanup.fleetops.dev/in-use"})
	g.Expect(k8s.Create(ctx, protecting)).To(Succeed())
	t.Cleanup(func() {
		p := cleanupPolicy("protecting", nil)
		_ = k8s.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		_ = k8s.Delete(context.Background(), p)
	})

	want := `CleanupPolicy protecting: the requesting user may not delete managedclusteraddons.addon.open-cluster-management.io in every namespace`
	g.Eventually(func() error { return deleter.Delete(ctx, cleanupPolicy("protecting", nil)) }, enforcementTimeout).
		Should(And(Satisfy(apierrors.IsForbidden), MatchError(ContainSubstring(want)), MatchError(ContainSubstring("deleting it is checked as changing it would be"))))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "protecting"}, protecting)).To(Succeed())
	g.Expect(protecting.GetDeletionTimestamp()).To(BeNil(), "the refused delete began nothing")

	release := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	g.Expect(deleter.Patch(ctx, cleanupPolicy("protecting", nil), release)).To(And(Satisfy(apierrors.IsForbidden),
		MatchError(ContainSubstring(want)), MatchError(ContainSubstring("removing its finalizer cleanup.fleetops.dev/in-use or changing its owners"))))
	g.Expect(deleter.Patch(ctx, cleanupPolicy("protecting", nil),
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"fleet"}}}`)))).To(Succeed(), "labels change freely")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "protecting"}, protecting)).To(Succeed())
	g.Expect(protecting.GetFinalizers()).To(ConsistOf("cleanup.fleetops.dev/in-use"))

	// Nor by narrowing it first: a change needs the rights of the policy as
	// it stood, so the cheapest spec, then a delete, is refused at the
	// change, in one request or two; and neither may it be given an owner
	// whose deletion would have the garbage collector delete it.
	cheap := map[string]any{"keepNamespace": "true", "deletionStages": []any{map[string]any{"name": "noop",
		"group": "cleanup.fleetops.dev", "version": "v1alpha1", "resource": "cleanuppolicies", "when": "false"}}}
	narrower := userWith(ctx, t, "policy-narrower", right{"patch", clusterGroup, "managedclusters"}, right{"list", clusterGroup, "managedclusters"},
		right{"delete", "cleanup.fleetops.dev", "cleanuppolicies"}, right{"list", "cleanup.fleetops.dev", "cleanuppolicies"})
	stored := cleanupPolicy("protecting", nil)
	g.Expect(narrower.Get(ctx, client.ObjectKey{Name: "protecting"}, stored)).To(Succeed())
	narrowed := stored.DeepCopy()
	narrowed.Object["spec"] = cleanupPolicy("", cheap).Object["spec"]
	wasProtecting := ", as the policy stood before this change"
	g.Expect(narrower.Update(ctx, narrowed)).To(And(Satisfy(apierrors.IsForbidden), MatchError(ContainSubstring(want)), MatchError(ContainSubstring(wasProtecting))))
	narrowed.SetFinalizers(nil)
	g.Expect(narrower.Update(ctx, narrowed)).To(MatchError(ContainSubstring(wasProtecting)), "narrowed and released in one request")
	owned := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":[{"apiVersion":"cleanup.fleetops.dev/v1alpha1",`+
		`"kind":"CleanupPolicy","name":"ghost","uid":"0b6c3c2e-0000-4000-8000-000000000000"}]}}`))
	ownerRefused := "CleanupPolicy protecting: only a user who may do everything sets or changes its metadata.ownerReferences"
	g.Expect(deleter.Patch(ctx, cleanupPolicy("protecting", nil), owned)).To(And(Satisfy(apierrors.IsForbidden), MatchError(ContainSubstring(ownerRefused))))
	g.Expect(owner.Patch(ctx, cleanupPolicy("protecting", nil), owned)).To(MatchError(ContainSubstring(ownerRefused)), "even with every right the policy exercises")
	// Nor created with one, to be deleted with its owner once widened.
	withOwner := cleanupPolicy("owned", cheap)
	withOwner.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cleanup.fleetops.dev/v1alpha1", Kind: "CleanupPolicy", Name: "ghost",
		UID: "0b6c3c2e-0000-4000-8000-000000000000"}})
	g.Expect(owner.Create(ctx, withOwner)).To(MatchError(ContainSubstring("CleanupPolicy owned: only a user who may do everything sets or changes its metadata.ownerReferences")))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "protecting"}, protecting)).To(Succeed())
	g.Expect(protecting.GetOwnerReferences()).To(BeEmpty())
	g.Expect(protecting.Object["spec"]).To(HaveKeyWithValue("deletionProtection", "true"), "the stored policy is as it was")

	g.Expect(owner.Delete(ctx, cleanupPolicy("protecting", nil))).To(Succeed())
	g.Expect(owner.Patch(ctx, cleanupPolicy("protecting", nil), release)).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKey{Name: "protecting"}, protecting) }).Should(Satisfy(apierrors.IsNotFound))
}

// TestAuthorityCap: a policy that needs more distinct rights than
// admission checks is refused, saying so, for a user who may not do
// everything; an administrator who may writes it.
func TestAuthorityCap(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	withoutWebhook(ctx, t)
	ensureAuthority(ctx, g)
	many := userWith(ctx, t, "many-stages", teardownRights...)
	var stages []any
	for i := range admissionpolicy.MaxCheckedRights / 2 {
		stages = append(stages, map[string]any{"name": fmt.Sprintf("s%d", i), "group": "example.com", "version": "v1", "resource": fmt.Sprintf("r%d", i)})
	}
	spec := map[string]any{"keepNamespace": "true", "deletionStages": stages}
	g.Eventually(func() error { return createOnce(ctx, many, cleanupPolicy("many", spec)) }, enforcementTimeout).
		// Delete and list of each stage, patch and list of ManagedClusters.
		Should(MatchError(ContainSubstring(fmt.Sprintf("needs %d distinct rights", 2*len(stages)+2))))
	g.Expect(k8s.Create(ctx, cleanupPolicy("many", spec))).To(Succeed())
	g.Expect(k8s.Delete(ctx, cleanupPolicy("many", nil))).To(Succeed())
}

// createOnce creates obj as c. While the API server has not compiled the
// admission policies yet, a policy it admits is deleted and an error
// returned, so that the caller tries again.
func createOnce(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	err := c.Create(ctx, obj)
	if err != nil {
		return err
	}
	if err := k8s.Delete(ctx, obj); err != nil {
		return err
	}
	return errors.New("admitted")
}

// withoutWebhook removes the CleanupPolicy webhook's registration, whose
// server does not run here: what is refused is refused by the admission
// policies alone.
func withoutWebhook(ctx context.Context, t *testing.T) {
	t.Helper()
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	hook.Name = "validating-webhook-configuration"
	if err := k8s.Delete(ctx, hook); client.IgnoreNotFound(err) != nil {
		t.Fatalf("removing the webhook registration: %v", err)
	}
}

// userWith returns a client of a new user bound to the editor role of
// config/rbac and to a ClusterRole of the rights given.
func userWith(ctx context.Context, t *testing.T, name string, rights ...right) client.Client {
	t.Helper()
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "cleanuppolicy_editor_role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	editor := &rbacv1.ClusterRole{}
	g.Expect(yaml.UnmarshalStrict(raw, editor)).To(Succeed())
	// A fleet-administrator right, folded into no other role.
	g.Expect(editor.AggregationRule).To(BeNil())
	for label := range editor.Labels {
		g.Expect(label).NotTo(ContainSubstring("aggregate-to"), "the editor role aggregates into another")
	}
	g.Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, editor))).To(Succeed())
	bind(ctx, g, name, editor.Name)
	if len(rights) > 0 {
		role := &rbacv1.ClusterRole{}
		role.Name = "test-rights-" + name
		for _, r := range rights {
			role.Rules = append(role.Rules, rbacv1.PolicyRule{Verbs: []string{r.verb}, APIGroups: []string{r.group}, Resources: []string{r.resource}})
		}
		g.Expect(k8s.Create(ctx, role)).To(Succeed())
		bind(ctx, g, name, role.Name)
	}
	user, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(user.Config(), client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func bind(ctx context.Context, g *WithT, user, role string) {
	b := &rbacv1.ClusterRoleBinding{
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	b.Name = role + "-" + user
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
}

// cleanupPolicy is a CleanupPolicy named name with the spec given over a
// Required default strategy.
func cleanupPolicy(name string, spec map[string]any) *unstructured.Unstructured {
	s := map[string]any{"removeStrategy": map[string]any{"default": "Required"}}
	for k, v := range spec {
		s[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cleanup.fleetops.dev/v1alpha1", "kind": "CleanupPolicy",
		"metadata": map[string]any{"name": name}, "spec": s,
	}}
}
