package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// testVersion is the version the test builds the plugin with.
const testVersion = "v0.1.0"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// pluginBin builds the plugin as make plugin does, once, into a folder
// that also holds the completion shim, and returns that folder.
func pluginBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kubectl-cleanup-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion,
			"-o", filepath.Join(binDir, "kubectl-cleanup"), ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
			return
		}
		shim, err := os.ReadFile("kubectl_complete-cleanup")
		if err == nil {
			err = os.WriteFile(filepath.Join(binDir, "kubectl_complete-cleanup"), shim, 0o755)
		}
		buildErr = err
	})
	if buildErr != nil {
		t.Fatalf("building the plugin: %v", buildErr)
	}
	return binDir
}

// result is what a run of a binary printed and its exit code.
type result struct {
	out, err string
	code     int
}

// run runs name (kubectl-cleanup, or kubectl) with the built plugin and
// the completion shim first on PATH, and KUBECONFIG set.
func run(t *testing.T, kubeconfig, name string, args ...string) result {
	t.Helper()
	dir := pluginBin(t)
	bin := filepath.Join(dir, name)
	if name == "kubectl" {
		bin = filepath.Join(testenv.BinDir(), "kubectl")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(), "KUBECONFIG=" + kubeconfig}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running %s %v: %v", name, args, err)
	}
	return result{out: out.String(), err: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

// twoContexts writes a kubeconfig whose current context reaches no API
// server, and whose context "hub" is the test's.
func twoContexts(t *testing.T, g *WithT, kubeconfig string) string {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	hub := cfg.Contexts[cfg.CurrentContext].DeepCopy()
	cfg.Contexts["hub"] = hub
	nowhere := cfg.Clusters[hub.Cluster].DeepCopy()
	nowhere.Server = "https://127.0.0.1:1"
	cfg.Clusters["nowhere"] = nowhere
	broken := hub.DeepCopy()
	broken.Cluster = "nowhere"
	cfg.Contexts["broken"] = broken
	cfg.CurrentContext = "broken"
	path := filepath.Join(t.TempDir(), "two-contexts.kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// TestExitCodesAndFlags runs the built plugin against an API server and
// checks each exit code, the kubectl flags and -n, and the version.
func TestExitCodesAndFlags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	env, c := sharedHub(t)
	g.Expect(createCluster(ctx, c, "dev-1")).To(Succeed())
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}})).To(Succeed())
	_, err := record.Save(ctx, c, "ops", bigRecord("gone-1", 1, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)), nil)
	g.Expect(err).NotTo(HaveOccurred())
	kc := env.Kubeconfig
	plugin := func(args ...string) result { return run(t, kc, "kubectl-cleanup", args...) }

	// 0: success, and the usage names kubectl cleanup.
	r := plugin("status")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	r = plugin("--help")
	g.Expect(r.code).To(Equal(exitOK))
	g.Expect(r.out).To(ContainSubstring("  kubectl cleanup [command]"))
	g.Expect(r.out).NotTo(ContainSubstring("kubectl-cleanup"))
	g.Expect(r.out).To(ContainSubstring("Exit status:\n  0  success\n  1  refused"))
	r = plugin("plan", "--help")
	g.Expect(r.out).To(ContainSubstring("  kubectl cleanup plan CLUSTER [flags]"))
	g.Expect(r.out).To(ContainSubstring("-n/--namespace does not apply: ManagedClusters are cluster-scoped"))

	// 2: usage errors, before anything is read.
	for _, args := range [][]string{{"plan"}, {"bogus"}, {"status", "--bogus"}, {"status", "-o", "xml"},
		{"uninstall", "--signal-works", "delete"}, {"history", "-n", "ops", "--operator-namespace", "other"},
		{"version", "--client", "-o", "xml"}} {
		r = plugin(args...)
		g.Expect(r.code).To(Equal(exitUsage), "%v: %s", args, r.err)
	}

	// 3: not found.
	for _, args := range [][]string{{"plan", "missing"}, {"confirm-delete", "missing"}, {"history", "gone-1"}, {"version", "-n", "ops"}} {
		r = plugin(args...)
		g.Expect(r.code).To(Equal(exitNotFound), "%v: %s", args, r.err)
	}

	// 1: refused: dev-1 is not protected from deletion, nothing is confirmed.
	r = plugin("confirm-delete", "dev-1")
	g.Expect(r.code).To(Equal(exitRefused), r.err)
	g.Expect(r.err).To(ContainSubstring("nothing confirmed: ManagedCluster dev-1 is not protected from deletion"))

	// 4: the API server refuses (an impersonated user without rights) or is not reached.
	r = plugin("status", "--as", "nobody")
	g.Expect(r.code).To(Equal(exitFailure), r.err)
	g.Expect(r.err).To(ContainSubstring(`User "nobody" cannot list resource`))
	two := twoContexts(t, g, kc)
	r = run(t, two, "kubectl-cleanup", "status")
	g.Expect(r.code).To(Equal(exitFailure), r.err)
	r = run(t, two, "kubectl-cleanup", "status", "--context", "hub")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	r = plugin("status", "--kubeconfig", two)
	g.Expect(r.code).To(Equal(exitFailure), r.err)

	// -n names the operator's namespace where one applies, and is said not
	// to apply elsewhere.
	r = plugin("history", "-n", "ops")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("gone-1"))
	r = plugin("history", "gone-1", "--namespace", "ops")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.out).To(ContainSubstring("Teardown of ManagedCluster gone-1"))
	r = plugin("plan", "dev-1", "-n", "ops")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.err).To(ContainSubstring("Warning: -n/--namespace does not apply to plan: ManagedClusters are cluster-scoped"))

	// version: the plugin's, and the operator's from its Deployment's image.
	r = plugin("version", "--client", "--kubeconfig", "/nonexistent")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.out).To(Equal("Plugin:   " + testVersion + "\n"))
	r = plugin("version")
	g.Expect(r.code).To(Equal(exitNotFound), r.err)
	g.Expect(r.out).To(ContainSubstring("Operator: not found"))

	// An operator that is not a Deployment, by its heartbeat: version finds
	// it, and the other commands warn of its version; stale, it is not found.
	beat := heartbeatConfigMap(g, "ops", "laptop-4242", "v0.2.0", time.Now())
	g.Expect(c.Create(ctx, beat)).To(Succeed())
	r = plugin("version")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.out).To(Equal("Plugin:   " + testVersion + "\n" +
		"Operator: v0.2.0 (process laptop-4242, heartbeat ops/cleanup-operator-heartbeat-laptop-4242; not a Deployment)\n"))
	r = plugin("status")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.err).To(ContainSubstring("Warning: the operator runs version v0.2.0 (process laptop-4242, " +
		"heartbeat ops/cleanup-operator-heartbeat-laptop-4242), the plugin is v0.1.0"))
	g.Expect(c.Delete(ctx, beat)).To(Succeed())
	g.Expect(c.Create(ctx, heartbeatConfigMap(g, "ops", "laptop-4242", "v0.2.0", time.Now().Add(-time.Hour)))).To(Succeed())
	r = plugin("version")
	g.Expect(r.code).To(Equal(exitNotFound), r.err)

	d := operatorDeployment()
	d.Namespace = "ops"
	d.Spec.Template.Spec.Containers[0].Image = "registry.example/cleanup-operator:v0.2.0"
	g.Expect(c.Create(ctx, d)).To(Succeed())
	r = plugin("version")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.out).To(Equal("Plugin:   " + testVersion + "\n" +
		"Operator: v0.2.0 (Deployment ops/cleanup-operator-controller-manager, image registry.example/cleanup-operator:v0.2.0)\n"))
	g.Expect(r.err).To(BeEmpty())
	r = plugin("version", "-n", "ops", "-o", "json")
	g.Expect(r.out).To(MatchJSON(`{"plugin": "v0.1.0", "operator": {"version": "v0.2.0",
		"deployment": "ops/cleanup-operator-controller-manager", "image": "registry.example/cleanup-operator:v0.2.0"}}`))

	// Another operator version: one warning on standard error, not a failure.
	r = plugin("status")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(strings.Count(r.err, "Warning: the operator runs version v0.2.0 (Deployment ops/cleanup-operator-controller-manager), "+
		"the plugin is v0.1.0")).To(Equal(1), r.err)
	r = plugin("history", "-n", "ops", "-o", "json")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.err).To(ContainSubstring("Warning: the operator runs version v0.2.0"))
	g.Expect(r.out).To(HavePrefix("["))

	// 1: refused: uninstall while the operator's Deployment has replicas.
	r = plugin("uninstall")
	g.Expect(r.code).To(Equal(exitRefused), r.err)
	g.Expect(r.err).To(ContainSubstring("refusing: the operator still seems to run (Deployment ops/cleanup-operator-controller-manager"))

	// The same version, and the settings an operator publishes (no operator
	// runs here): no warning.
	d.Spec.Template.Spec.Containers[0].Image = "registry.example/cleanup-operator:" + testVersion
	g.Expect(c.Update(ctx, d)).To(Succeed())
	published, err := settings.Defaults(record.DefaultNamespace).ConfigMap()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, published)).To(Succeed())
	r = plugin("status")
	g.Expect(r.code).To(Equal(exitOK), r.err)
	g.Expect(r.err).To(BeEmpty())

	checkStatusOfVanishingCluster(ctx, g, env.Config)
}
