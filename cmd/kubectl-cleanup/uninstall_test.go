package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

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

	env, c := sharedHub(t)
	stopOperator, err := startLeaderElectedOperator(ctx, env)
	g.Expect(err).NotTo(HaveOccurred())
	stopped := false
	defer func() {
		if !stopped {
			g.Expect(stopOperator()).To(Succeed())
		}
	}()

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
		g.Expect(get(ctx, g, c, managedClusterGVK, client.ObjectKey{Name: "c2"}).GetLabels()).To(HaveKeyWithValue(v1alpha1.DeletionProtectedLabel, "true"))
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

	// A dry run says what is in the way and what it would change, changes
	// nothing, and exits as refused: a run now would refuse.
	before := operatorMarks(ctx, c)
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--dry-run")
	g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
	g.Expect(inOrder(out,
		"Dry run: nothing is changed.",
		"Would refuse now: 1 teardown(s) in progress: c1",
		"Would refuse now: the operator still seems to run (Lease default/"+v1alpha1.LeaderElectionID+" is held by",
		"ManagedCluster c2: would remove finalizer "+v1alpha1.ClusterCleanupFinalizer+", label "+v1alpha1.DeletionProtectedLabel+
			", annotation "+v1alpha1.GoverningPolicyAnnotation,
		"CleanupPolicy uninstall-test: would remove finalizer "+v1alpha1.InUseFinalizer,
		"Namespace c3: would remove label "+v1alpha1.ClusterDeletingLabel,
		"ManifestWork c2/app: would remove annotation "+v1alpha1.OrphaningAnnotation,
		"ConfigurationPolicy c2/team: would remove annotation "+v1alpha1.PruneAnnotation,
		"ValidatingAdmissionPolicyBinding "+admissionpolicy.BindingName(admissionpolicy.DeletingClusterPolicy)+": would delete",
		"ValidatingAdmissionPolicy "+admissionpolicy.DeletingClusterPolicy+": would delete",
		"ManifestWork c2/cleanup-signal: would set deleteOption Orphan",
		"ManifestWork c2/cleanup-signal: would delete once the work agent has applied its Orphan",
		"Left in place on purpose:",
		"dry run done: a run now would refuse (1 teardown(s) in progress; the operator still seems to run)",
	)).To(Succeed(), out)
	g.Expect(out).NotTo(ContainSubstring("Dry run done: run again without --dry-run"))
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
	deleteWebhookConfigurations(ctx, g, c)

	// The work agent of c2 applies the Orphan of the signal work once
	// uninstall says it waits for that; uninstall must not delete the work
	// before.
	agentErr := make(chan error, 1)
	go func() {
		agentErr <- func() error {
			for {
				w := &workv1.ManifestWork{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: "c2", Name: "cleanup-signal"}, w); err != nil {
					return err
				}
				if w.DeletionTimestamp != nil {
					return errors.New("the signal work was deleted before the agent applied its Orphan")
				}
				if isOrphanWork(w) && strings.Contains(out2.String(), "waiting for the work agent to apply its Orphan") {
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
		"ManagedCluster c2: removed finalizer "+v1alpha1.ClusterCleanupFinalizer+", label "+v1alpha1.DeletionProtectedLabel+
			", annotation "+v1alpha1.GoverningPolicyAnnotation,
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

	// Nothing of the operator's is left; users' settings are, and the
	// record of c1's teardown.
	g.Expect(operatorMarks(ctx, c)).To(BeEmpty())
	records, err := record.List(ctx, c, record.DefaultNamespace, "c1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(records).To(HaveLen(1))
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
