package main

import (
	"bytes"
	"context"
	"errors"
	"maps"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/controller"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestUninstallNamesAgreeWithTheOperator: the plugin spells the teardown's
// annotations without importing the code that writes them.
func TestUninstallNamesAgreeWithTheOperator(t *testing.T) {
	g := NewWithT(t)
	g.Expect(forcedObjectsAnnotation).To(Equal(controller.ForcedObjectsAnnotation))
	g.Expect(unconfirmedOrphansAnnotation).To(Equal(controller.UnconfirmedOrphansAnnotation))
	g.Expect(forcingAnnotation).To(Equal(controller.ForcingAnnotation))
}

// TestUninstall runs the operator with leader election, as a Deployment
// does, over two governed clusters; deletes one while a monitored object
// holds its cleanup; checks that uninstall refuses, that --dry-run changes
// nothing, and that --wait waits for the teardown, then for the operator to
// stop, before it changes anything. Then the hub deletes clusters as it
// would without the operator, and nothing of the operator's is left.
func TestUninstall(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	env, err := testenv.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()
	stopOperator, err := startLeaderElectedOperator(ctx, env)
	g.Expect(err).NotTo(HaveOccurred())
	stopped := false
	defer func() {
		if !stopped {
			g.Expect(stopOperator()).To(Succeed())
		}
	}()

	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(applyFile(ctx, c, filepath.Join("testdata", "uninstall.yaml"))).To(Succeed())
	// What a CleanupPolicy carries while teardowns it started run (the
	// operator puts it there; here it stays until uninstall removes it).
	g.Expect(patchMeta(ctx, c, cleanupPolicyGVK, client.ObjectKey{Name: "uninstall-test"},
		`{"metadata":{"finalizers":["`+v1alpha1.InUseFinalizer+`"]}}`)).To(Succeed())
	// A namespace left labelled, as a cleanup released mid-way once left it.
	g.Expect(patchMeta(ctx, c, namespaceGVK, client.ObjectKey{Name: "c3"},
		`{"metadata":{"labels":{"`+v1alpha1.ClusterDeletingLabel+`":"true"}}}`)).To(Succeed())

	// c2 is Available, and its agent applied the signal work once.
	g.Expect(setAvailable(ctx, c, "c2")).To(Succeed())
	signal := &workv1.ManifestWork{}
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: "c2", Name: "cleanup-signal"}, signal)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(setApplied(ctx, c, signal)).To(Succeed())

	// The operator governs both clusters and stamps c2's work and policy.
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"c1", "c2"} {
			mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: name})
			g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))
			g.Expect(mc.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.GoverningPolicyAnnotation, "uninstall-test"))
		}
		work := get(ctx, g, c, manifestWorkGVK, client.ObjectKey{Namespace: "c2", Name: "app"})
		g.Expect(work.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.OrphaningAnnotation, "SelectivelyOrphan"))
		cp := get(ctx, g, c, configurationPolicyGVK, client.ObjectKey{Namespace: "c2", Name: "team"})
		g.Expect(cp.GetAnnotations()).To(HaveKeyWithValue(v1alpha1.PruneAnnotation, "DeleteIfCreated"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(operatorMarks(ctx, c)).NotTo(BeEmpty())

	// Delete c1: the monitored ConfigMap holds its teardown.
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "c1"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		mc := get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "c1"})
		g.Expect(findCondition(mc, v1alpha1.ContentDeleteSuccessCondition)).To(
			HaveKeyWithValue("reason", v1alpha1.WaitingForMonitoredResourcesReason))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Uninstall refuses, naming the teardown.
	out, err := kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("refusing: 1 teardown(s) in progress: c1."))
	g.Expect(out).To(ContainSubstring("--wait"))

	// A dry run says what is in the way and what it would change, and
	// changes nothing.
	before := operatorMarks(ctx, c)
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--dry-run")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(inOrder(out,
		"Dry run: nothing is changed.",
		"Would refuse now: 1 teardown(s) in progress: c1",
		"Would refuse now: the operator still seems to run (Lease default/"+v1alpha1.LeaderElectionID+" is held by",
		"ManagedCluster c2: would remove finalizer "+v1alpha1.ClusterCleanupFinalizer+", annotation "+v1alpha1.GoverningPolicyAnnotation,
		"CleanupPolicy uninstall-test: would remove finalizer "+v1alpha1.InUseFinalizer,
		"Namespace c3: would remove label "+v1alpha1.ClusterDeletingLabel,
		"ManifestWork c2/app: would remove annotation "+v1alpha1.OrphaningAnnotation,
		"ConfigurationPolicy c2/team: would remove annotation "+v1alpha1.PruneAnnotation,
		"ValidatingAdmissionPolicyBinding "+admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy)+": would delete",
		"ValidatingAdmissionPolicy "+admissionpolicy.DeletingClusterPolicy+": would delete",
		"ManifestWork c2/cleanup-signal: would set deleteOption Orphan",
		"ManifestWork c2/cleanup-signal: would delete once the work agent has applied its Orphan",
		"Left in place on purpose:",
		"Dry run done",
	)).To(Succeed(), out)
	g.Expect(operatorMarks(ctx, c)).To(Equal(before))

	// --wait waits for the teardown, then for the operator to stop.
	out2 := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out2, ErrOut: out2})
		cmd.SetArgs([]string{"--kubeconfig", env.Kubeconfig, "uninstall", "--wait", "--timeout", "2m"})
		done <- cmd.ExecuteContext(ctx)
	}()
	g.Eventually(out2.String).WithTimeout(30 * time.Second).Should(
		ContainSubstring("Waiting for 1 teardown(s) to end:\n  c1: WaitingForMonitoredResources: "))
	g.Expect(c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "hold"}})).To(Succeed())
	g.Eventually(out2.String).WithTimeout(30 * time.Second).Should(
		ContainSubstring("Every teardown has ended.\nWaiting for the operator to stop: Lease default/" + v1alpha1.LeaderElectionID))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "c1"}, metaObject(managedClusterGVK, "", "c1")))).To(BeTrue())
	// Nothing changed while the operator runs.
	g.Consistently(func() []string { return operatorMarks(ctx, c) }).WithTimeout(3 * time.Second).Should(Equal(operatorMarks(ctx, c)))
	g.Expect(operatorMarks(ctx, c)).To(ContainElement("ManagedCluster c2: finalizer " + v1alpha1.ClusterCleanupFinalizer))

	// Uninstall the operator as `make undeploy` does: its webhook
	// configuration, then its manager.
	g.Expect(c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())
	g.Expect(stopOperator()).To(Succeed())
	stopped = true

	// The work agent of c2 applies the Orphan of the signal work; uninstall
	// must not delete the work before.
	agentErr := make(chan error, 1)
	go func() {
		agentErr <- func() error {
			for {
				w := &workv1.ManifestWork{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: "c2", Name: "cleanup-signal"}, w); err != nil {
					return err
				}
				if isOrphanWork(w) {
					if w.DeletionTimestamp != nil {
						return errors.New("the signal work was deleted before the agent applied its Orphan")
					}
					return setApplied(ctx, c, w)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}()
	select {
	case err := <-done:
		g.Expect(err).NotTo(HaveOccurred(), out2.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("uninstall --wait did not end:\n%s", out2.String())
	}
	g.Expect(<-agentErr).To(Succeed())
	text := out2.String()
	t.Log(text)
	g.Expect(text).NotTo(ContainSubstring("Note: the operator does not seem to run"))
	g.Expect(inOrder(text,
		"Waiting for the operator to stop",
		"ManagedCluster c2: removed finalizer "+v1alpha1.ClusterCleanupFinalizer+", annotation "+v1alpha1.GoverningPolicyAnnotation,
		"CleanupPolicy uninstall-test: removed finalizer "+v1alpha1.InUseFinalizer,
		"Namespace c3: removed label "+v1alpha1.ClusterDeletingLabel,
		"ManifestWork c2/app: removed annotation "+v1alpha1.OrphaningAnnotation,
		"ConfigurationPolicy c2/team: removed annotation "+v1alpha1.PruneAnnotation,
		"ValidatingAdmissionPolicyBinding "+admissionpolicy.BindingName(admissionpolicy.DeletingWorkPolicy)+": deleted",
		"ValidatingAdmissionPolicy "+admissionpolicy.DeletingWorkPolicy+": deleted",
		"ManifestWork c2/cleanup-signal: set deleteOption Orphan",
		"ManifestWork c2/cleanup-signal: waiting for the work agent to apply its Orphan",
		"ManifestWork c2/cleanup-signal: deleted; the work agent had applied its Orphan",
		"Done:",
	)).To(Succeed(), text)

	// Nothing of the operator's is left; users' settings are.
	g.Expect(operatorMarks(ctx, c)).To(BeEmpty())
	for _, obj := range admissionpolicy.Objects() {
		gvk := obj.GetObjectKind().GroupVersionKind()
		err := c.Get(ctx, client.ObjectKey{Name: obj.GetName()}, metaObject(gvk, "", obj.GetName()))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s: %v", gvk.Kind, obj.GetName(), err)
	}
	app := &workv1.ManifestWork{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "c2", Name: "app"}, app)).To(Succeed())
	g.Expect(app.Spec.DeleteOption).NotTo(BeNil())
	g.Expect(app.Spec.DeleteOption.PropagationPolicy).To(Equal(workv1.DeletePropagationPolicyTypeSelectivelyOrphan))
	cp := &unstructured.Unstructured{}
	cp.SetGroupVersionKind(configurationPolicyGVK)
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "c2", Name: "team"}, cp)).To(Succeed())
	g.Expect(cp.Object["spec"]).To(HaveKeyWithValue("pruneObjectBehavior", "DeleteIfCreated"))

	// The hub deletes a cluster at once, and admits works where the label was.
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "c2"))).To(Succeed())
	err = c.Get(ctx, client.ObjectKey{Name: "c2"}, metaObject(managedClusterGVK, "", "c2"))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Expect(c.Create(ctx, &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c3", Name: "new"}})).To(Succeed())

	// Running it again changes nothing.
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("removed"))
	g.Expect(out).NotTo(ContainSubstring("deleted"))
	g.Expect(out).To(ContainSubstring("Done:"))

	// The operator's Deployment with replicas makes it refuse, unless told.
	g.Expect(c.Create(ctx, operatorDeployment())).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("refusing: the operator still seems to run (Deployment default/cleanup-operator-controller-manager: 0 of 1 replica(s) running)"))
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--ignore-running-operator")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("WARNING: the operator still seems to run"))
}

// TestUninstallLeavesWhatTheAgentCannotConfirm: the signal work of a
// cluster that is not Available gets its Orphan and stays, reported; a
// second run, once the agent applied it, deletes it. Without an operator,
// a deleted cluster whose teardown may have started holds uninstall; one
// under a dry-run policy does not; a webhook configuration that outlived
// the operator is named as the reason a policy cannot be released; a user
// with only the permissions docs/uninstall.md lists can run it.
func TestUninstallLeavesWhatTheAgentCannotConfirm(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, err := testenv.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{"name": "gone"}, "spec": map[string]any{"hubAcceptsClient": true}}})).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}})).To(Succeed())
	work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "cleanup-signal",
		Labels:      map[string]string{v1alpha1.SignalWorkLabel: "true"},
		Annotations: map[string]string{v1alpha1.SpecHashAnnotation: "0123456789abcdef"}}}
	g.Expect(c.Create(ctx, work)).To(Succeed())
	g.Expect(setApplied(ctx, c, work)).To(Succeed())
	// Someone else's work with the signal label only: never changed.
	lookalike := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "lookalike",
		Labels: map[string]string{v1alpha1.SignalWorkLabel: "true"}}}
	g.Expect(c.Create(ctx, lookalike)).To(Succeed())
	lookalikeVersion := lookalike.ResourceVersion

	out, err := kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManifestWork gone/cleanup-signal: left in place with deleteOption Orphan: cluster gone is not Available"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(work), work)).To(Succeed())
	g.Expect(isOrphanWork(work)).To(BeTrue())
	g.Expect(work.DeletionTimestamp).To(BeNil())

	// Keep leaves it alone, whatever the agent did.
	g.Expect(setApplied(ctx, c, work)).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--signal-works", "keep")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManifestWork gone/cleanup-signal: left in place (--signal-works=keep)"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(work), work)).To(Succeed())

	// The agent applied the Orphan: the next run deletes the work.
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManifestWork gone/cleanup-signal: deleted; the work agent had applied its Orphan"))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(work), work))).To(BeTrue())
	g.Expect(out).To(ContainSubstring("ManifestWork gone/lookalike: left in place: it has the label " + v1alpha1.SignalWorkLabel +
		"=true, but the operator did not write it"))
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lookalike), lookalike)).To(Succeed())
	g.Expect(lookalike.ResourceVersion).To(Equal(lookalikeVersion))

	// A deleted cluster under a dry-run policy is no teardown: the operator
	// changed nothing for it, so it is released and the hub deletes it.
	g.Expect(createCluster(ctx, c, "dry", v1alpha1.ClusterCleanupFinalizer)).To(Succeed())
	g.Expect(setCondition(ctx, c, "dry", v1alpha1.ContentDeleteSuccessCondition, "False", v1alpha1.DryRunReason)).To(Succeed())
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "dry"))).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ManagedCluster dry: removed finalizer " + v1alpha1.ClusterCleanupFinalizer))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "dry"}, unstructuredObject(managedClusterGVK, "", "dry")))).To(BeTrue())

	// A deleted cluster with the finalizer and no outcome yet may be mid-way:
	// without the operator it never ends, and uninstall says to start it.
	g.Expect(createCluster(ctx, c, "pending", v1alpha1.ClusterCleanupFinalizer)).To(Succeed())
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "pending"))).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("refusing: 1 teardown(s) in progress: pending."))
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--wait", "--timeout", "1s")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Note: the operator does not seem to run"))
	g.Expect(out).To(ContainSubstring("  pending: no step reported yet"))
	g.Expect(out).To(ContainSubstring("waiting for the teardowns of pending: --timeout 1s passed"))
	mc := unstructuredObject(managedClusterGVK, "", "pending")
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "pending"}, mc)).To(Succeed())
	g.Expect(mc.GetFinalizers()).To(ContainElement(v1alpha1.ClusterCleanupFinalizer))

	// The operator's webhook configuration outlived it: the finalizer of a
	// CleanupPolicy cannot be removed, and uninstall says why.
	var hooks admissionregistrationv1.ValidatingWebhookConfigurationList
	g.Expect(c.List(ctx, &hooks)).To(Succeed())
	g.Expect(hooks.Items).NotTo(BeEmpty())
	g.Expect(c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())
	g.Expect(c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{v1alpha1.InUseFinalizer}},
		Spec: v1alpha1.CleanupPolicySpec{RemoveStrategy: v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired}}})).To(Succeed())
	for _, h := range hooks.Items {
		h.ResourceVersion, h.UID = "", ""
		g.Expect(c.Create(ctx, &h)).To(Succeed())
	}
	g.Expect(patchMeta(ctx, c, managedClusterGVK, client.ObjectKey{Name: "pending"}, `{"metadata":{"finalizers":null}}`)).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("CleanupPolicy held: "))
	g.Expect(out).To(ContainSubstring("its ValidatingWebhookConfiguration outlived it; delete that"))

	// A user with the permissions docs/uninstall.md lists, without those to
	// read Deployments and Leases: uninstall warns that it cannot tell
	// whether the operator runs, and does its work.
	g.Expect(c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Succeed())
	userConfig := userKubeconfig(ctx, t, g, c, env, "uninstaller", "uninstaller", []rbacv1.PolicyRule{
		{APIGroups: []string{"", "cluster.open-cluster-management.io", "cleanup.fleetops.dev", "policy.open-cluster-management.io"},
			Resources: []string{"managedclusters", "cleanuppolicies", "namespaces", "configurationpolicies"},
			Verbs:     []string{"get", "list", "patch"}},
		{APIGroups: []string{"work.open-cluster-management.io"}, Resources: []string{"manifestworks"},
			Verbs: []string{"get", "list", "patch", "delete"}},
		{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
	})
	g.Expect(admissionpolicy.Ensure(ctx, c)).To(Succeed())
	out, err = kubectlCleanup(t, userConfig, "uninstall")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Warning: cannot tell whether the operator still runs: cannot list Deployments"))
	g.Expect(out).To(ContainSubstring("CleanupPolicy held: removed finalizer " + v1alpha1.InUseFinalizer))
	g.Expect(out).To(ContainSubstring("ValidatingAdmissionPolicy " + admissionpolicy.DeletingClusterPolicy + ": deleted"))
	// Only the work someone else labelled keeps the label.
	g.Expect(operatorMarks(ctx, c)).To(ConsistOf("ManifestWork gone/lookalike: label " + v1alpha1.SignalWorkLabel))

	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--signal-works", "delete")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`--signal-works: "delete" is not one of orphan, keep`))
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--timeout", "0s")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("--timeout: 0s is not a positive duration"))
}

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
