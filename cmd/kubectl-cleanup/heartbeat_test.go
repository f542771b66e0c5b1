package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	teardownctl "github.com/fleetops-dev/cleanup-operator/internal/teardown"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/operator/heartbeat"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

// TestPluginSeesAnOperatorThatIsNotADeployment starts the operator as
// run-local does (in this process, with the permissions it ships with, no
// Deployment, no leader election): version finds it by its heartbeat,
// uninstall refuses, and so does uninstall --dry-run, by its exit status.
// Stopped, its heartbeat goes and uninstall goes ahead. A manager started
// by hand with another namespace is found there.
func TestPluginSeesAnOperatorThatIsNotADeployment(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	env, c, stopOperator := startHub(ctx, t, true)

	// Its heartbeat, in its namespace, written with its own rights.
	var beat heartbeat.Beat
	g.Eventually(func(g Gomega) {
		beats, err := heartbeat.List(ctx, c, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(beats).To(HaveLen(1))
		beat = beats[0]
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(beat.Namespace).To(Equal(record.DefaultNamespace))
	g.Expect(beat.Holder).To(Equal(heartbeat.Identity()))
	g.Expect(beat.Live(time.Now())).To(BeTrue())
	where := "process " + beat.Holder + ", heartbeat " + beat.Namespace + "/" + beat.Name

	out, err := kubectlCleanup(t, env.Kubeconfig, "version")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Operator: unknown (" + where + "; not a Deployment)"))
	out, err = kubectlCleanup(t, env.Kubeconfig, "version", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var v versions
	g.Expect(json.Unmarshal([]byte(out), &v)).To(Succeed(), out)
	g.Expect(v.Operator).To(Equal(&operatorVersion{Process: beat.Holder, Heartbeat: beat.Namespace + "/" + beat.Name}))

	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall")
	g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
	g.Expect(out).To(ContainSubstring("refusing: the operator still seems to run (operator process " + beat.Holder +
		" keeps its heartbeat ConfigMap " + beat.Namespace + "/" + beat.Name))
	g.Expect(out).To(ContainSubstring("helm uninstall"))
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--dry-run")
	g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
	g.Expect(out).To(ContainSubstring("Would refuse now: the operator still seems to run (operator process " + beat.Holder))
	g.Expect(out).To(ContainSubstring("dry run done: a run now would refuse (the operator still seems to run)"))

	// Stopped cleanly: its heartbeat goes, and nothing is in the way.
	g.Expect(stopOperator()).To(Succeed())
	beats, err := heartbeat.List(ctx, c, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(beats).To(BeEmpty())
	out, err = kubectlCleanup(t, env.Kubeconfig, "version")
	g.Expect(exitCode(err, true)).To(Equal(exitNotFound), out)
	g.Expect(out).To(ContainSubstring("Operator: not found"))
	out, err = kubectlCleanup(t, env.Kubeconfig, "uninstall", "--dry-run")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Dry run done: run again without --dry-run to make these changes."))
	// A cluster in cleanup with no operator: status says it will not move.
	g.Expect(createCluster(ctx, c, "stuck", v1alpha1.ClusterCleanupFinalizer)).To(Succeed())
	g.Expect(c.Delete(ctx, unstructuredObject(managedClusterGVK, "", "stuck"))).To(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("stuck"))
	g.Expect(out).To(ContainSubstring("Warning: no operator runs (no Deployment of it with replicas, " +
		"no operator process with a live heartbeat): these cleanups move only while one runs."))

	// A manager started by hand, as the administrator, with another namespace.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}})).To(Succeed())
	other, err := env.StartOperatorWith(ctx, nil, operator.Options{Records: teardownctl.RecordOptions{Namespace: "ops"}})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(other.Stop()).To(Succeed()) }()
	g.Eventually(func(g Gomega) {
		out, err := kubectlCleanup(t, env.Kubeconfig, "version")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("heartbeat ops/" + heartbeat.Name(heartbeat.Identity()) + "; not a Deployment)"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "version", "-n", "ops")
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectlCleanup(t, env.Kubeconfig, "version", "-n", record.DefaultNamespace)
	g.Expect(exitCode(err, true)).To(Equal(exitNotFound), out)
	out, err = kubectlCleanup(t, env.Kubeconfig, "status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("no operator runs"))
	// Once it let the cluster no policy governs go, uninstall refuses for it.
	g.Eventually(func(g Gomega) {
		out, err := kubectlCleanup(t, env.Kubeconfig, "uninstall")
		g.Expect(exitCode(err, true)).To(Equal(exitRefused), out)
		g.Expect(out).To(ContainSubstring("the operator still seems to run (operator process " + beat.Holder +
			" keeps its heartbeat ConfigMap ops/"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	out, err = kubectlCleanup(t, env.Kubeconfig, "status")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("no operator runs"))
}

// heartbeatConfigMap is the heartbeat of an operator process, as it
// writes it, renewed at renewed.
func heartbeatConfigMap(g Gomega, namespace, holder, version string, renewed time.Time) *corev1.ConfigMap {
	raw, err := json.Marshal(heartbeat.Beat{Holder: holder, Version: version, Started: metav1.NewTime(renewed.Add(-time.Minute)),
		Renewed: metav1.NewTime(renewed), Interval: metav1.Duration{Duration: heartbeat.DefaultInterval}})
	g.Expect(err).NotTo(HaveOccurred())
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: heartbeat.Name(holder),
		Labels: map[string]string{heartbeat.Label: "true"}}, Data: map[string]string{heartbeat.DataKey: string(raw)}}
}
