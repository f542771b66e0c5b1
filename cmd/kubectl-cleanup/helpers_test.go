package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// startLeaderElectedOperator runs the manager as cmd/main.go does with
// --leader-elect: it holds the Lease the plugin looks for, and releases it
// when stopped.
func startLeaderElectedOperator(ctx context.Context, env *testenv.Env) (stop func() error, err error) {
	opts := env.ManagerOptions(operator.ManagerOptions())
	opts.Controller.SkipNameValidation = ptr.To(true)
	opts.LeaderElection = true
	opts.LeaderElectionID = v1alpha1.LeaderElectionID
	opts.LeaderElectionNamespace = "default"
	opts.LeaderElectionReleaseOnCancel = true
	mgr, err := ctrl.NewManager(env.Config, opts)
	if err != nil {
		return nil, err
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	if _, err := operator.Setup(mgrCtx, mgr, operator.Options{EnableWebhooks: true}); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	stop = func() error {
		cancel()
		return <-done
	}
	if err := env.WaitForWebhook(ctx); err != nil {
		_ = stop()
		return nil, err
	}
	return stop, nil
}

// operatorMarks lists every finalizer, label and annotation of the
// operator's on the objects it writes, and its admission objects.
func operatorMarks(ctx context.Context, c client.Client) []string {
	var marks []string
	for _, gvk := range []schema.GroupVersionKind{managedClusterGVK, cleanupPolicyGVK, namespaceGVK, manifestWorkGVK,
		configurationPolicyGVK, {Version: "v1", Kind: "ConfigMap"}} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			marks = append(marks, "listing "+gvk.Kind+": "+err.Error())
			continue
		}
		for _, item := range list.Items {
			if record.IsRecord(&item) {
				continue // teardown records are left on purpose: they outlive the operator
			}
			name := gvk.Kind + " " + displayName(&item)
			for _, f := range item.Finalizers {
				if strings.Contains(f, "cleanup.fleetops.dev/") {
					marks = append(marks, name+": finalizer "+f)
				}
			}
			// In key order: two calls must list one object's marks alike.
			for _, k := range slices.Sorted(maps.Keys(item.Labels)) {
				if v := item.Labels[k]; strings.Contains(k, "cleanup.fleetops.dev/") || (k == v1alpha1.ManagedByLabel && v == v1alpha1.ManagedBy) {
					marks = append(marks, name+": label "+k)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(item.Annotations)) {
				if strings.Contains(k, "cleanup.fleetops.dev/") {
					marks = append(marks, name+": annotation "+k)
				}
			}
		}
	}
	for _, obj := range admissionpolicy.Objects() {
		gvk := obj.GetObjectKind().GroupVersionKind()
		if err := c.Get(ctx, client.ObjectKey{Name: obj.GetName()}, metaObject(gvk, "", obj.GetName())); err == nil {
			marks = append(marks, gvk.Kind+" "+obj.GetName())
		}
	}
	return marks
}

func metaObject(gvk schema.GroupVersionKind, namespace, name string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	obj.SetGroupVersionKind(gvk)
	return obj
}

func unstructuredObject(gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

func get(ctx context.Context, g Gomega, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	g.Expect(c.Get(ctx, key, obj)).To(Succeed())
	return obj
}

func patchMeta(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey, patch string) error {
	return c.Patch(ctx, metaObject(gvk, key.Namespace, key.Name), client.RawPatch("application/merge-patch+json", []byte(patch)))
}

// deleteWebhookConfigurations deletes every ValidatingWebhookConfiguration
// and waits until the API server stops calling them: it learns of the
// deletion from its own watch, and until then a CleanupPolicy write fails
// with "connection refused" once no webhook server runs.
func deleteWebhookConfigurations(ctx context.Context, g Gomega, c client.Client) {
	g.Expect(c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())
	probe := func() error {
		return c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe"},
			Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}}},
			client.DryRunAll)
	}
	g.Eventually(probe).WithTimeout(30 * time.Second).Should(Succeed())
}

// restoreWebhookConfigurations re-creates configurations whose webhook
// server no longer runs, and waits until the API server calls them.
func restoreWebhookConfigurations(ctx context.Context, g Gomega, c client.Client, hooks []admissionregistrationv1.ValidatingWebhookConfiguration) {
	for _, h := range hooks {
		h.ResourceVersion, h.UID = "", ""
		g.Expect(c.Create(ctx, &h)).To(Succeed())
	}
	g.Eventually(func() error {
		return c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe"},
			Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}}},
			client.DryRunAll)
	}).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("failed calling webhook")))
}

// applyFile applies every object of a multi-document YAML file server-side,
// field manager "gitops".
func applyFile(ctx context.Context, c client.Client, file string) error {
	objs, err := testenv.ObjectsFromFile(file)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("gitops")); err != nil {
			return err
		}
	}
	return nil
}

// createCluster creates a ManagedCluster with the given finalizers.
func createCluster(ctx context.Context, c client.Client, name string, finalizers ...string) error {
	mc := unstructuredObject(managedClusterGVK, "", name)
	mc.SetFinalizers(finalizers)
	if err := unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient"); err != nil {
		return err
	}
	return c.Create(ctx, mc)
}

// setCondition sets one status condition of a ManagedCluster.
func setCondition(ctx context.Context, c client.Client, name, condType, status, reason string) error {
	mc := unstructuredObject(managedClusterGVK, "", name)
	if err := c.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		return err
	}
	if err := unstructured.SetNestedSlice(mc.Object, []any{map[string]any{
		"type": condType, "status": status, "reason": reason, "message": "test",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions"); err != nil {
		return err
	}
	return c.Status().Update(ctx, mc)
}

// setAvailable reports the cluster's agent as reaching the hub.
func setAvailable(ctx context.Context, c client.Client, name string) error {
	return setCondition(ctx, c, name, clusterv1.ManagedClusterConditionAvailable, "True", "ManagedClusterAvailable")
}

// setApplied reports the work's current generation as applied by the agent.
func setApplied(ctx context.Context, c client.Client, w *workv1.ManifestWork) error {
	apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
		Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete",
		Message: "test", ObservedGeneration: w.Generation})
	return c.Status().Update(ctx, w)
}

// operatorDeployment is the manager's Deployment as config/default names
// it; nothing runs it here.
func operatorDeployment() *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "cleanup-operator", "control-plane": "controller-manager"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cleanup-operator-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "manager:test"}}},
			},
		},
	}
}

// syncBuffer is an output that a command writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// userKubeconfig creates the ClusterRole of rules, binds it to a new user
// of env and returns the path of a kubeconfig of that user. The API server
// is shared: each test names users and roles of its own.
func userKubeconfig(ctx context.Context, t *testing.T, g *WithT, c client.Client, env *testenv.Env,
	user, role string, rules []rbacv1.PolicyRule) string {
	g.Expect(c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules})).To(Succeed())
	g.Expect(c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})).To(Succeed())
	u, err := env.AddUser(envtest.User{Name: user}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := u.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	g.Expect(os.WriteFile(path, raw, 0o600)).To(Succeed())
	return path
}

// hubWithOperator starts, on the shared API server, the operator as its own
// service account; it stops when the test ends. It returns the server and
// an administrator's client.
func hubWithOperator(ctx context.Context, t *testing.T) (*testenv.Env, client.Client) {
	t.Helper()
	env, c, _ := startHub(ctx, t, true)
	return env, c
}

// hubWithAdminOperator is hubWithOperator with the operator running as the
// administrator: for tests of the plugin, not of the operator's rights.
func hubWithAdminOperator(ctx context.Context, t *testing.T) (*testenv.Env, client.Client) {
	t.Helper()
	env, c, _ := startHub(ctx, t, false)
	return env, c
}

// startHub starts the operator on the shared API server, as its own
// service account or as the administrator; it stops when the test ends, and
// stop stops it before that (once).
func startHub(ctx context.Context, t *testing.T, asServiceAccount bool) (env *testenv.Env, c client.Client, stop func() error) {
	t.Helper()
	g := NewWithT(t)
	env, c = sharedHub(t)
	var cfg *rest.Config
	if asServiceAccount {
		var err error
		cfg, err = env.OperatorConfig(ctx)
		g.Expect(err).NotTo(HaveOccurred())
	}
	running, err := env.StartOperator(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	stop = sync.OnceValue(running.Stop)
	t.Cleanup(func() { g.Expect(stop()).To(Succeed()) })
	return env, c, stop
}
