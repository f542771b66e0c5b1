package install_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// managerRun is the manager binary running as the install runs it.
type managerRun struct {
	cmd   *exec.Cmd
	log   string
	probe string
}

func (r *managerRun) logs() string { return logsOf(r.log) }

// startManager starts the manager binary with the installed Deployment's
// args and env, as its ServiceAccount, behind the webhook Service, and
// returns once its readiness probe passes: the webhook serves its
// certificate and the CA is injected.
func startManager(ctx context.Context, t *testing.T, env *envtest.Environment, c client.Client, manager string, objs objects) *managerRun {
	t.Helper()
	d, err := objs.deployment()
	if err != nil {
		t.Fatal(err)
	}
	webhookEndpoint(ctx, t, c, webhookService(t, objs), webhookPort(t, d.Spec.Template.Spec.Containers[0]))
	run := launchManager(t, env, manager, objs)
	run.waitReady(ctx, t)
	return run
}

// launchManager starts the manager process as installed, with extra args.
//
// What a pod would give it differently: the certificate folder (an
// emptyDir) is a temporary folder; the probe and metrics addresses are
// free ports of this machine, as other processes may hold the installed
// ones here; the leader-election namespace, which in a pod is read from the
// ServiceAccount's mount, is passed as a flag; POD_NAMESPACE, from the
// downward API, is the install's namespace.
func launchManager(t *testing.T, env *envtest.Environment, manager string, objs objects, extra ...string) *managerRun {
	t.Helper()
	d, err := objs.deployment()
	if err != nil {
		t.Fatal(err)
	}
	ns, pod := d.Namespace, d.Spec.Template.Spec
	container := pod.Containers[0]
	run := &managerRun{log: filepath.Join(t.TempDir(), "manager.log"), probe: freeAddr(t)}
	args := []string{}
	for _, a := range container.Args {
		switch {
		case strings.HasPrefix(a, "--webhook-cert-path="):
			a = "--webhook-cert-path=" + t.TempDir()
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + run.probe
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + freeAddr(t)
		}
		args = append(args, a)
	}
	args = append(args, "--leader-elect-namespace="+ns,
		"--kubeconfig="+impersonatingKubeconfig(t, env, ns, pod.ServiceAccountName))
	args = append(args, extra...)

	logFile, err := os.Create(run.log)
	if err != nil {
		t.Fatal(err)
	}
	run.cmd = exec.Command(manager, args...)
	run.cmd.Env = podEnv(t, container, ns)
	run.cmd.Stdout, run.cmd.Stderr = logFile, logFile
	if err := run.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.cmd.Process.Signal(syscall.SIGTERM)
		_ = run.cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			t.Log(run.logs())
		}
	})
	t.Logf("manager %s", strings.Join(args, " "))
	return run
}

// waitReady waits for the manager's readiness probe to pass.
func (r *managerRun) waitReady(ctx context.Context, t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() (int, error) {
		resp, err := http.Get("http://" + r.probe + "/readyz")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(500*time.Millisecond).
		Should(Equal(http.StatusOK), r.logs)
}

// podEnv is the container's environment as the kubelet would set it: only
// values and the namespace from the downward API are expected.
func podEnv(t *testing.T, c corev1.Container, ns string) []string {
	t.Helper()
	var env []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+ns)
		default:
			t.Fatalf("env %s: the test does not resolve %+v", e.Name, e.ValueFrom)
		}
	}
	return env
}

// webhookService is the Service the ValidatingWebhookConfiguration calls.
func webhookService(t *testing.T, objs objects) *corev1.Service {
	t.Helper()
	for _, vwc := range objs.ofKind("ValidatingWebhookConfiguration") {
		hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
		for _, h := range hooks {
			ref, _ := h.(map[string]any)["clientConfig"].(map[string]any)["service"].(map[string]any)
			u := objs.find("Service", fmt.Sprint(ref["namespace"]), fmt.Sprint(ref["name"]))
			if u == nil {
				t.Fatalf("the webhook's Service %v is not installed", ref)
			}
			svc := &corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc); err != nil {
				t.Fatal(err)
			}
			return svc
		}
	}
	t.Fatal("the install has no webhook")
	return nil
}

// webhookPort is the manager container's webhook port.
func webhookPort(t *testing.T, c corev1.Container) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == "webhook-server" {
			return p.ContainerPort
		}
	}
	t.Fatal("the manager container declares no webhook-server port")
	return 0
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
