package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createPolicy creates a CleanupPolicy that governs every cluster, with
// the default stages (add-ons, then works) and the Required strategy; with
// maxConcurrent > 0, a blast radius that runs at most that many teardowns
// at once and bounds nothing else.
func createPolicy(ctx context.Context, c client.Client, maxConcurrent int) error {
	spec := map[string]any{"removeStrategy": map[string]any{"default": "Required"}}
	if maxConcurrent > 0 {
		spec["blastRadius"] = map[string]any{"maxConcurrent": int64(maxConcurrent)}
	}
	pol := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cleanup.fleetops.dev/v1alpha1",
		"kind":       "CleanupPolicy",
		"metadata":   map[string]any{"name": "bench"},
		"spec":       spec,
	}}
	return c.Create(ctx, pol)
}

// operatorProcess is the manager binary running as the operator's user.
type operatorProcess struct {
	cmd  *exec.Cmd
	done chan error
	log  string
}

// startManager starts the manager binary with the shipped RBAC, no flags
// but the address ones (and extra), webhooks off as outside a cluster.
func startManager(ctx context.Context, r *run, extra ...string) (*operatorProcess, error) {
	kubeconfig, err := r.cp.operatorKubeconfig(ctx, r.p)
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(r.cp.dir, "manager.log")
	out, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, extra...)
	args = append(args, r.p.managerFlags...)
	cmd := exec.Command(r.mgrBin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "ENABLE_WEBHOOKS=false")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, err
	}
	op := &operatorProcess{cmd: cmd, done: make(chan error, 1), log: logFile}
	go func() {
		op.done <- cmd.Wait()
		_ = out.Close()
	}()
	return op, nil
}

func (op *operatorProcess) stop() {
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.done:
	case <-time.After(10 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.done
	}
}

// exited says whether the manager has stopped on its own.
func (op *operatorProcess) exited() error {
	select {
	case err := <-op.done:
		op.done <- err
		return fmt.Errorf("the manager exited (%v); see %s", err, op.log)
	default:
		return nil
	}
}

// watchExit cancels ctx when the manager exits.
func (op *operatorProcess) watchExit(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for ctx.Err() == nil {
			if op.exited() != nil {
				cancel()
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return ctx, cancel
}

// startOperator starts the manager and waits until it governs every
// cluster; settled, also until the admission policy that refuses new works
// and add-ons in a deleting cluster's namespace has been in force long
// enough for the operator to delete a whole group in one request
// (admissionSettle), as on a hub where it has run for more than a few
// seconds.
func startOperator(settled bool, extra ...string) func(ctx context.Context, r *run) (*instance, error) {
	return startOperatorPaced(settled, 0, extra...)
}

// startOperatorPaced is startOperator with a policy whose blast radius
// allows maxConcurrent teardowns at once (0: no bound; -1: the case's
// maxConcurrent); the instance's note says how many it saw under way at
// once.
func startOperatorPaced(settled bool, maxConcurrent int, extra ...string) func(ctx context.Context, r *run) (*instance, error) {
	return func(ctx context.Context, r *run) (*instance, error) {
		// Per run: the contender is started once per case, and -1 means
		// each case's own pace, not the first case's.
		maxConcurrent := maxConcurrent
		if maxConcurrent < 0 {
			maxConcurrent = r.maxConcurrent
		}
		if err := createPolicy(ctx, r.admin, maxConcurrent); err != nil {
			return nil, err
		}
		op, err := startManager(ctx, r, extra...)
		if err != nil {
			return nil, err
		}
		wctx, cancel := op.watchExit(ctx)
		defer cancel()
		if err := waitFinalizer(wctx, r.admin, r.fleet.clusters, operatorFinalizer, 50*time.Millisecond); err != nil {
			op.stop()
			if e := op.exited(); e != nil {
				return nil, e
			}
			return nil, fmt.Errorf("waiting for the operator to govern the clusters: %w", err)
		}
		if settled {
			if err := waitAdmissionSettled(wctx, r.admin); err != nil {
				op.stop()
				return nil, firstErr(op.exited(), fmt.Errorf("waiting for the operator's admission policy to settle: %w", err))
			}
		}
		var peak peakConcurrency
		inst := &instance{
			pid: op.cmd.Process.Pid,
			teardown: func(ctx context.Context) error {
				wctx, cancel := op.watchExit(ctx)
				defer cancel()
				if maxConcurrent > 0 {
					go peak.watch(wctx, r.admin)
				}
				if err := waitClustersGone(wctx, r.admin); err != nil {
					return firstErr(op.exited(), err)
				}
				return nil
			},
			stop: op.stop,
		}
		if maxConcurrent > 0 {
			inst.note = func() string {
				return fmt.Sprintf("at most %d teardowns under way at once (maxConcurrent %d)", peak.max.Load(), maxConcurrent)
			}
		}
		return inst, nil
	}
}

// admissionSettle is the operator's AdmissionSettle (internal/teardown)
// with a second's margin: the API server's timestamps are whole seconds.
const admissionSettle = 6 * time.Second

// deletingClusterPolicy is the operator's admission policy that refuses new
// works and add-ons in a deleting cluster's namespace.
const deletingClusterPolicy = "cleanup-operator-deleting-cluster"

// waitAdmissionSettled waits until the operator's deletingClusterPolicy and
// its binding exist and neither was created or written in the last
// admissionSettle.
func waitAdmissionSettled(ctx context.Context, c client.Client) error {
	for {
		var policy admissionregistrationv1.ValidatingAdmissionPolicy
		var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
		err := c.Get(ctx, client.ObjectKey{Name: deletingClusterPolicy}, &policy)
		if err == nil {
			err = c.Get(ctx, client.ObjectKey{Name: deletingClusterPolicy + "-binding"}, &binding)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil && time.Since(lastWritten(&policy)) >= admissionSettle && time.Since(lastWritten(&binding)) >= admissionSettle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lastWritten is when obj was created or last written, as its managed
// fields record.
func lastWritten(obj metav1.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}
