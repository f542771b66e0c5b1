package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// kubectlCleanup runs the plugin against a kubeconfig and returns its output.
func kubectlCleanup(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

// TestPlanPredictsTheCleanup prints the plan of a cluster with the plugin,
// then deletes the cluster with the operator running, and checks that the
// operator deleted the groups in the order the plan printed, and that the
// status command followed the cleanup while it waited.
func TestPlanPredictsTheCleanup(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	env, c := hubWithAdminOperator(ctx, t)
	g.Expect(testenv.CreateFromFile(ctx, c, filepath.Join("testdata", "fleet.yaml"))).To(Succeed())

	// The operator governs c1 and creates its deletion-signal work.
	signal := &unstructured.Unstructured{}
	signal.SetAPIVersion("work.open-cluster-management.io/v1")
	signal.SetKind("ManifestWork")
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: "c1", Name: "cleanup-signal"}, signal)
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The ManifestWork controller stamps app-1's orphaning decision before
	// any deletion; the plan then waits for the agent to apply it.
	g.Eventually(func(g Gomega) {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("work.open-cluster-management.io/v1")
		w.SetKind("ManifestWork")
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "c1", Name: "app-1"}, w)).To(Succeed())
		p, _, _ := unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy")
		g.Expect(p).To(Equal("SelectivelyOrphan"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	out, err := kubectlCleanup(t, env.Kubeconfig, "plan", "c1", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var plan decision.Plan
	g.Expect(json.Unmarshal([]byte(out), &plan)).To(Succeed(), out)

	g.Expect(plan.Policy).To(Equal("plan-test"))
	g.Expect(plan.Held).To(BeEmpty())
	g.Expect(plan.Strategy).To(Equal(v1alpha1.RemoveStrategyRequired))
	g.Expect(plan.Timeout).To(Equal("10m0s"))
	g.Expect(steps(plan)).To(Equal([]string{
		"orphaning next: wait manifestworks.work.open-cluster-management.io/app-1 (0)",
		"signal cleanup-signal later: label namespaces/c1 (0), delete manifestworks.work.open-cluster-management.io/cleanup-signal (0)",
		"gate later: wait configmaps/hold (0)",
		"stage addons later: delete managedclusteraddons.addon.open-cluster-management.io/a1 (0)",
		"stage workloads later: delete manifestworks.work.open-cluster-management.io/app-1 (0), " +
			"delete manifestworks.work.open-cluster-management.io/app-3 (1), delete manifestworks.work.open-cluster-management.io/app-2 (2)",
		"stage agent later: delete manifestworks.work.open-cluster-management.io/c1-agent (0)",
		"namespace c1 later: delete namespaces/c1 (0)",
		"finish later: removeFinalizer managedclusters.cluster.open-cluster-management.io/c1 (0)",
	}))
	g.Expect(plan.Works).To(Equal([]decision.WorkPlan{
		{Name: "app-1", PropagationPolicy: "SelectivelyOrphan", Orphaned: []decision.OrphanPlan{
			{Resource: "customresourcedefinitions", Name: "widgets.example.com", Rule: "keep-crds"}}},
		{Name: "app-2"}, {Name: "app-3"}, {Name: "c1-agent"},
	}))
	g.Expect(plan.Prune).To(Equal([]decision.PrunePlan{
		{Object: "ConfigurationPolicy audit", Behavior: v1alpha1.PruneDeleteAll, Ineffective: true},
		{Object: "ConfigurationPolicy enforce-team", Behavior: v1alpha1.PruneDeleteIfCreated},
	}))

	// A user who may only read the fleet, not CRDs, gets the same plan.
	viewerConfig := userKubeconfig(ctx, t, g, c, env, "viewer", "fleet-viewer", []rbacv1.PolicyRule{{
		APIGroups: []string{"", "cluster.open-cluster-management.io", "work.open-cluster-management.io",
			"addon.open-cluster-management.io", "policy.open-cluster-management.io", "cleanup.fleetops.dev"},
		Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}})
	out, err = kubectlCleanup(t, viewerConfig, "plan", "c1", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var viewed decision.Plan
	g.Expect(json.Unmarshal([]byte(out), &viewed)).To(Succeed(), out)
	g.Expect(viewed).To(Equal(plan))

	// The same plan as YAML, and as text in the order of the steps.
	out, err = kubectlCleanup(t, env.Kubeconfig, "plan", "c1", "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var fromYAML decision.Plan
	g.Expect(yaml.Unmarshal([]byte(out), &fromYAML)).To(Succeed())
	g.Expect(fromYAML).To(Equal(plan))
	text, err := kubectlCleanup(t, env.Kubeconfig, "plan", "c1")
	g.Expect(err).NotTo(HaveOccurred(), text)
	g.Expect(text).To(ContainSubstring("governed by CleanupPolicy plan-test"))
	g.Expect(text).To(ContainSubstring("Why: matched by plan-test; the only one."))
	g.Expect(inOrder(text,
		"signal: delete ManifestWork cleanup-signal",
		"gate: wait until no configmaps remain (1 exist now: configmaps/hold)",
		"stage addons (1 of 3",
		"stage workloads (2 of 3",
		"cleanup-priority unset: app-1",
		"cleanup-priority 5: app-3",
		"cleanup-priority 10: app-2",
		"stage agent (3 of 3",
		"namespace c1: delete",
		"remove the finalizer cleanup.fleetops.dev/cluster-cleanup: the cluster goes, reason Completed",
		"app-1", "SelectivelyOrphan: customresourcedefinitions widgets.example.com (rule keep-crds)",
		"ConfigurationPolicy audit", "DeleteAll (no effect while remediationAction is inform)",
	)).To(Succeed(), text)

	// A cluster no policy governs: the plan says so and decides nothing.
	other := &unstructured.Unstructured{}
	other.SetAPIVersion("cluster.open-cluster-management.io/v1")
	other.SetKind("ManagedCluster")
	other.SetName("c2")
	g.Expect(c.Create(ctx, other)).To(Succeed())
	text, err = kubectlCleanup(t, env.Kubeconfig, "plan", "c2")
	g.Expect(err).NotTo(HaveOccurred(), text)
	g.Expect(text).To(ContainSubstring("ManagedCluster c2: no CleanupPolicy governs the cluster"))
	g.Expect(text).NotTo(ContainSubstring("If the cluster is deleted now"))
	out, err = kubectlCleanup(t, env.Kubeconfig, "plan", "absent")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("ManagedCluster absent not found"))

	// Nothing is being cleaned up yet.
	out, err = kubectlCleanup(t, env.Kubeconfig, "status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("No cluster is being cleaned up."))

	// The work agent applies app-1's SelectivelyOrphan, as it would before
	// the cluster is deleted: the teardown waits for that.
	g.Eventually(func(g Gomega) {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("work.open-cluster-management.io/v1")
		w.SetKind("ManifestWork")
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "c1", Name: "app-1"}, w)).To(Succeed())
		p, _, _ := unstructured.NestedString(w.Object, "spec", "deleteOption", "propagationPolicy")
		g.Expect(p).To(Equal("SelectivelyOrphan"))
		applied := []any{map[string]any{"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
			"message": "applied", "observedGeneration": w.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}
		g.Expect(unstructured.SetNestedSlice(w.Object, applied, "status", "conditions")).To(Succeed())
		g.Expect(c.Status().Update(ctx, w)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Delete the cluster: the monitored ConfigMap holds the cleanup, and
	// the status command says so, with what remains.
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
	mc.SetKind("ManagedCluster")
	mc.SetName("c1")
	g.Expect(c.Delete(ctx, mc)).To(Succeed())
	var status []clusterStatus
	g.Eventually(func(g Gomega) {
		out, err := kubectlCleanup(t, env.Kubeconfig, "status", "-o", "json")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(json.Unmarshal([]byte(out), &status)).To(Succeed())
		g.Expect(status).To(HaveLen(1))
		g.Expect(status[0].Step).To(Equal(v1alpha1.WaitingForMonitoredResourcesReason))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(status[0].Cluster).To(Equal("c1"))
	g.Expect(status[0].Policy).To(Equal("plan-test"))
	g.Expect(status[0].Next).To(Equal(decision.StepGate))
	g.Expect(status[0].Remaining).To(Equal(remaining{
		Monitored: 1, Stages: map[string]int{"addons": 1, "workloads": 3, "agent": 1}, Namespace: true}))
	text, err = kubectlCleanup(t, env.Kubeconfig, "status")
	g.Expect(err).NotTo(HaveOccurred(), text)
	g.Expect(text).To(MatchRegexp(`c1\s+plan-test\s+WaitingForMonitoredResources\s+\S+\s+monitored 1, addons 1, agent 1, workloads 3, namespace`))

	// Release the gate; the operator finishes, in the plan's order.
	g.Expect(c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "hold"}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "c1"}, mc))
	}).WithTimeout(30 * time.Second).Should(BeTrue())

	// The teardown record lists the groups deleted in the order they were.
	records, err := record.List(ctx, c, record.DefaultNamespace, "c1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(records).To(HaveLen(1))
	var done []string
	for _, e := range records[0].Entries {
		if group := e.Step + "/" + e.Priority; e.Action == record.Deleted && strings.HasPrefix(e.Step, "stage/") && !slices.Contains(done, group) {
			done = append(done, group)
		}
	}
	var planned []string
	for _, st := range plan.Steps {
		for _, a := range st.Actions {
			if group := "stage/" + st.Name + "/" + a.Priority; st.Kind == decision.StepStage && !slices.Contains(planned, group) {
				planned = append(planned, group)
			}
		}
	}
	g.Expect(done).To(Equal(planned))
}

// TestPlanRefusesBadInput names the flag or argument that is wrong.
func TestPlanRefusesBadInput(t *testing.T) {
	g := NewWithT(t)
	out, err := kubectlCleanup(t, "/nonexistent/kubeconfig", "plan", "c1", "-o", "table")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`--output: "table" is not one of json, yaml`))
	out, err = kubectlCleanup(t, "/nonexistent/kubeconfig", "plan")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring("accepts 1 arg(s), received 0"))
}

// steps summarizes a plan: each step, its state, and its actions' verbs,
// objects and groups.
func steps(p decision.Plan) []string {
	var out []string
	for _, st := range p.Steps {
		line := string(st.Kind)
		if st.Name != "" {
			line += " " + st.Name
		}
		line += " " + string(st.State)
		var acts []string
		for _, a := range st.Actions {
			acts = append(acts, fmt.Sprintf("%s %s/%s (%d)", a.Verb, a.Resource, a.Name, a.Group))
		}
		if len(acts) > 0 {
			line += ": " + strings.Join(acts, ", ")
		}
		out = append(out, line)
	}
	return out
}

// inOrder checks that s holds each part, each after the one before.
func inOrder(s string, parts ...string) error {
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			return &orderError{part: p}
		}
		rest = rest[i+len(p):]
	}
	return nil
}

type orderError struct{ part string }

func (e *orderError) Error() string { return "missing, or out of order: " + e.part }
