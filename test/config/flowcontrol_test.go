package config_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/flowcontrol"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestFlowControlIsTheOperators checks that config/default installs the
// FlowSchema and priority level the operator creates at start when they are
// absent, under the same names, for the manager's own service account: a
// hub installed either way has the same objects.
func TestFlowControlIsTheOperators(t *testing.T) {
	g := NewWithT(t)
	m := build(t, "default")
	deployments := decode[appsv1.Deployment](t, m, "Deployment")
	g.Expect(deployments).To(HaveLen(1))
	sa, ns := deployments[0].Spec.Template.Spec.ServiceAccountName, deployments[0].Namespace
	want := flowcontrol.Objects(ns, sa)

	levels := decode[flowcontrolv1.PriorityLevelConfiguration](t, m, "PriorityLevelConfiguration")
	g.Expect(levels).To(HaveLen(1))
	g.Expect(levels[0].Namespace).To(BeEmpty(), "a cluster-scoped object")
	g.Expect(&levels[0]).To(Equal(want[0]))

	schemas := decode[flowcontrolv1.FlowSchema](t, m, "FlowSchema")
	g.Expect(schemas).To(HaveLen(1))
	g.Expect(schemas[0].Namespace).To(BeEmpty(), "a cluster-scoped object")
	g.Expect(&schemas[0]).To(Equal(want[1]))
}

// TestFlowControlApplies applies the FlowSchema and priority level of
// config/default to a real API server with kubectl apply --dry-run=server:
// the server validates them as it would install them.
func TestFlowControlApplies(t *testing.T) {
	g := NewWithT(t)
	m := build(t, "default")
	var docs []byte
	for _, r := range m.Resources() {
		if r.GetKind() != "FlowSchema" && r.GetKind() != "PriorityLevelConfiguration" {
			continue
		}
		raw, err := r.AsYAML()
		g.Expect(err).NotTo(HaveOccurred())
		docs = append(append(docs, "---\n"...), raw...)
	}
	g.Expect(docs).NotTo(BeEmpty())

	env, err := testenv.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(env.Stop()).To(Succeed()) }()
	f := filepath.Join(t.TempDir(), "flowcontrol.yaml")
	g.Expect(os.WriteFile(f, docs, 0o600)).To(Succeed())
	out, err := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", env.Kubeconfig,
		"apply", "--dry-run=server", "-f", f).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(And(
		ContainSubstring("prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/cleanup-operator-manager created (server dry run)"),
		ContainSubstring("flowschema.flowcontrol.apiserver.k8s.io/cleanup-operator-manager created (server dry run)")))

	// And a broken copy is refused, so the server is known to validate.
	var level flowcontrolv1.PriorityLevelConfiguration
	for _, r := range m.Resources() {
		if r.GetKind() == "PriorityLevelConfiguration" {
			raw, err := r.AsYAML()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(yaml.Unmarshal(raw, &level)).To(Succeed())
		}
	}
	level.Spec.Limited.LimitResponse.Queuing.HandSize = 100 // more than queues
	raw, err := yaml.Marshal(&level)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(f, raw, 0o600)).To(Succeed())
	out, err = exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", env.Kubeconfig,
		"apply", "--dry-run=server", "-f", f).CombinedOutput()
	g.Expect(err).To(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("handSize"))
}
