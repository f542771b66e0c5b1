package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ControllerManager is a kube-controller-manager process running the
// namespace and garbage-collector controllers against the control plane, so
// that deleted namespaces terminate and dependents of deleted owners are
// collected, as on a real cluster.
type ControllerManager struct {
	cmd  *exec.Cmd
	done chan error
}

// StartControllerManager starts bin/kube-controller-manager with the
// administrator's kubeconfig and returns once its namespace controller works:
// a probe namespace it deletes is gone. Its output goes to out.
func (e *Env) StartControllerManager(ctx context.Context, out io.Writer) (*ControllerManager, error) {
	bin := filepath.Join(BinDir(), "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no kube-controller-manager in %s: run 'make envtest-bins' (or 'make test')", BinDir())
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+e.Kubeconfig,
		"--controllers=namespace,garbagecollector",
		"--leader-elect=false",
		"--secure-port=0",
		// The namespace controller re-checks a terminating namespace on
		// watch events; resync rarely.
		"--min-resync-period=12h",
		"-v=1",
	)
	cmd.Stdout, cmd.Stderr = out, out
	// The process dies with its parent even if the parent is killed.
	setParentDeath(cmd)
	var err error
	onParentThread(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cm := &ControllerManager{cmd: cmd, done: make(chan error, 1)}
	go func() { cm.done <- cmd.Wait() }()
	if err := e.waitNamespaceController(ctx, cm.done); err != nil {
		_ = cm.Stop()
		return nil, err
	}
	return cm, nil
}

// Stop ends the process and waits for it.
func (cm *ControllerManager) Stop() error {
	if cm.cmd.ProcessState == nil {
		_ = cm.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-cm.done:
	case <-time.After(10 * time.Second):
		_ = cm.cmd.Process.Kill()
		<-cm.done
	}
	return nil
}

// waitNamespaceController deletes a probe namespace and waits until the
// namespace controller has removed it.
func (e *Env) waitNamespaceController(ctx context.Context, exited <-chan error) error {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "controller-manager-probe-"}}
	ns, err = cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("kube-controller-manager exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager did not terminate namespace %s: %w", ns.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
