// Command run-local runs the operator on a local control plane: a
// kube-apiserver and etcd built from Go modules, with the CleanupPolicy, OCM
// and policy CRDs installed, the samples and a sample fleet applied. It
// prints how to point kubectl at it, and stops everything on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

func main() {
	check := flag.Bool("check", false, "set everything up, wait until the sample policies are Ready, and exit")
	flag.Parse()
	logf.SetLogger(zap.New(zap.UseDevMode(false)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *check); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, check bool) (retErr error) {
	fmt.Fprintln(out, "starting kube-apiserver and etcd ...")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { retErr = errors.Join(retErr, env.Stop()) }()

	kubeconfig := filepath.Join(testenv.RepoRoot(), "bin", "local.kubeconfig")
	raw, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		return err
	}
	defer os.Remove(kubeconfig)

	mgr, err := ctrl.NewManager(env.Config, env.ManagerOptions(operator.ManagerOptions()))
	if err != nil {
		return err
	}
	mgrCtx, cancelMgr := context.WithCancel(ctx)
	defer cancelMgr()
	if _, err := operator.Setup(mgrCtx, mgr, operator.Options{EnableWebhooks: true}); err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	if err := env.WaitForWebhook(ctx); err != nil {
		return err
	}

	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		return err
	}
	samples, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "cleanup_*.yaml"))
	if err != nil {
		return err
	}
	files := append(samples, filepath.Join(testenv.RepoRoot(), "hack", "run-local", "fleet.yaml"))
	for _, f := range files {
		if err := apply(ctx, c, f); err != nil {
			return err
		}
	}
	if err := waitReady(ctx, c); err != nil {
		return err
	}

	kubectl := filepath.Join(testenv.BinDir(), "kubectl")
	fmt.Fprintf(out, `
The operator is running on a local control plane with a sample fleet.

  export KUBECONFIG=%s
  alias kubectl=%s

  kubectl get cleanuppolicies              # Ready, matched clusters
  kubectl get cleanuppolicy production -o yaml
  kubectl get managedclusters --show-labels
  kubectl label managedcluster dev-1 env=prod --overwrite   # and watch MATCHED change
  kubectl get events --field-selector involvedObject.kind=CleanupPolicy

Ctrl-C stops the operator and the control plane.
`, kubeconfig, kubectl)
	if check {
		cancelMgr()
		return <-mgrDone
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "\nstopping ...")
		cancelMgr()
		return <-mgrDone
	case err := <-mgrDone:
		return err
	}
}

// apply creates every object of a multi-document YAML file.
func apply(ctx context.Context, c client.Client, file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: creating %s %s: %w", file, u.GetKind(), u.GetName(), err)
		}
	}
}

func waitReady(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var list v1alpha1.CleanupPolicyList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		ready := 0
		for _, p := range list.Items {
			if meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ReadyCondition) {
				ready++
			}
		}
		if ready == len(list.Items) && ready > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sample policies did not become Ready: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
