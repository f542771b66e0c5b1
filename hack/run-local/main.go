// Command run-local runs the operator on a local control plane: a
// kube-apiserver, etcd and kube-controller-manager (namespace and garbage
// collector controllers) built from Go modules, with the CleanupPolicy, OCM
// and policy CRDs installed, the admission policies, the ACM example policy
// (config/samples/acm), a catch-all policy and a sample fleet applied. It
// prints how to point kubectl at it, and stops everything on Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

func main() {
	check := flag.Bool("check", false, "set everything up, wait until the sample policies are Ready, delete cluster prod-eu, wait until it is cleaned up, and exit")
	logFormat := flag.String("log-format", "console", "the operator's log: console (lines for people) or json (one object a line)")
	flag.Parse()

	// Ctrl-C, kill and a closed terminal stop everything in order; a second
	// one stops the command at once (its processes die with it).
	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	go func() { <-signalled.Done(); stop() }()
	// A write to a pipe whose reader is gone returns EPIPE instead of
	// killing the command, and stops it (stopOnBrokenPipe).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(signalled)
	defer cancel()
	out := stopOnBrokenPipe{w: os.Stdout, stop: cancel}

	log, err := newLogger(*logFormat, stopOnBrokenPipe{w: os.Stderr, stop: cancel})
	if err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(2)
	}
	logf.SetLogger(log)

	if err := run(ctx, out, options{check: *check}); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

// options are run's: check is the -check flag; env, how the control plane
// starts (tests audit it); then, what a test runs against the hub once the
// instructions are printed, as a newcomer would in a second terminal, with
// the kubeconfig they name (nil: nothing).
type options struct {
	check bool
	env   testenv.Options
	then  func(ctx context.Context, kubeconfig string) error
}

// runThen runs then, if any.
func (o options) runThen(ctx context.Context, kubeconfig string) error {
	if o.then == nil {
		return nil
	}
	return o.then(ctx, kubeconfig)
}

func run(ctx context.Context, out io.Writer, opts options) (retErr error) {
	env, stopControlPlane, err := startControlPlane(ctx, out, opts)
	if err != nil {
		return err
	}
	defer func() { retErr = errors.Join(retErr, stopControlPlane()) }()
	kubeconfig, err := writeKubeconfig(env)
	if err != nil {
		return err
	}
	defer os.Remove(kubeconfig)

	// The operator runs with the permissions it ships with (config/rbac),
	// not as an administrator.
	operatorCfg, err := env.OperatorConfig(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "starting the operator ...")
	running, err := env.StartOperator(ctx, operatorCfg)
	if err != nil {
		return err
	}
	exited := false
	defer func() {
		if !exited {
			retErr = errors.Join(retErr, running.Stop())
		}
	}()
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		return err
	}
	if err := seedFleet(ctx, c); err != nil {
		return err
	}
	// No managed cluster is behind the local fleet: a simulated work agent
	// applies the works and lets deleted ones go, as OCM's agent would.
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	go testenv.RunWorkAgent(agentCtx, c, 200*time.Millisecond)

	fmt.Fprintf(out, instructions, kubeconfig, testenv.BinDir())
	if err := opts.runThen(ctx, kubeconfig); err != nil {
		return err
	}
	if opts.check {
		return deleteAndWait(ctx, out, c, "prod-eu")
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "\nstopping ... (Ctrl-C again to quit at once)")
		return nil
	case err := <-running.Exited():
		exited = true
		return err
	}
}

// writeKubeconfig writes the administrator's kubeconfig of env to
// bin/local.kubeconfig, which the instructions name, and returns its path.
func writeKubeconfig(env *testenv.Env) (string, error) {
	kubeconfig := filepath.Join(testenv.RepoRoot(), "bin", "local.kubeconfig")
	raw, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		return "", err
	}
	return kubeconfig, os.WriteFile(kubeconfig, raw, 0o600)
}

// startControlPlane starts etcd, kube-apiserver and kube-controller-manager
// (namespace and garbage collector); stop stops them.
func startControlPlane(ctx context.Context, out io.Writer, opts options) (env *testenv.Env, stop func() error, err error) {
	fmt.Fprintln(out, "starting kube-apiserver and etcd ...")
	env, err = testenv.StartWith(opts.env)
	if err != nil {
		return nil, nil, err
	}
	logPath := filepath.Join(testenv.RepoRoot(), "bin", "local-controller-manager.log")
	fmt.Fprintf(out, "starting kube-controller-manager (namespace, garbage collector; log in %s) ...\n", logPath)
	kcmLog, err := os.Create(logPath)
	if err != nil {
		return nil, nil, errors.Join(err, env.Stop())
	}
	kcm, err := env.StartControllerManager(ctx, kcmLog)
	if err != nil {
		return nil, nil, errors.Join(err, kcmLog.Close(), env.Stop())
	}
	return env, func() error { return errors.Join(kcm.Stop(), kcmLog.Close(), env.Stop()) }, nil
}

// seedFleet serves the APIs the ACM example policy monitors, creates that
// policy, the local fleet's catch-all policy and the fleet, and waits until
// the policies are Ready.
func seedFleet(ctx context.Context, c client.Client) error {
	local := filepath.Join(testenv.RepoRoot(), "hack", "run-local")
	// The ACM example monitors Hive's and the application lifecycle's
	// resources: serve them first, as such a hub would.
	if err := testenv.CreateFromFile(ctx, c, filepath.Join(local, "apis.yaml")); err != nil {
		return err
	}
	if err := waitServed(ctx, c, "clusterdeployments.hive.openshift.io", "subscriptions.apps.open-cluster-management.io"); err != nil {
		return err
	}
	for _, f := range []string{
		filepath.Join(testenv.RepoRoot(), "config", "samples", "acm", "production.yaml"),
		filepath.Join(local, "policies.yaml"),
		filepath.Join(local, "fleet.yaml"),
	} {
		if err := testenv.CreateFromFile(ctx, c, f); err != nil {
			return err
		}
	}
	return waitReady(ctx, c)
}

// instructions tell the newcomer what to try; the kubeconfig and the
// binaries' directory fill them in.
const instructions = `
The operator is running on a local control plane with a sample fleet:
clusters prod-eu and prod-sandbox (policy production), dev-1 and my-test-cluster
(policy default; docs/getting-started.md tries its starter policy on my-test-cluster),
with a simulated work agent that applies their ManifestWorks and lets deleted ones go.

  export KUBECONFIG=%s
  export PATH=%s:$PATH     # kubectl and the kubectl-cleanup plugin

  kubectl get fcpol                      # Ready, matched clusters
  kubectl cleanup plan prod-eu                     # what deleting prod-eu would do, step by step
  kubectl delete managedcluster prod-eu            # refused: prod-eu is protected from deletion
  kubectl cleanup confirm-delete prod-eu           # confirms it
  kubectl delete managedcluster prod-eu --wait=false
  kubectl get managedcluster prod-eu -o jsonpath='{.status.conditions[?(@.type=="ContentDeleteSuccess")]}'
  kubectl get events --field-selector involvedObject.name=prod-eu --sort-by=.metadata.creationTimestamp
  kubectl cleanup history prod-eu                  # what the cleanup did, object by object
  kubectl cleanup status                           # clusters in cleanup, their step and what remains
  kubectl label managedcluster dev-1 env=prod --overwrite   # and watch MATCHED change

Ctrl-C stops the operator and the control plane.
`

// deleteAndWait deletes a sample cluster as the instructions say, waits
// until the cluster and its namespace are gone, and prints the cluster's
// events and its teardown record: the steps of its cleanup.
func deleteAndWait(ctx context.Context, out io.Writer, c client.Client, name string) error {
	fmt.Fprintf(out, "\ndeleting ManagedCluster %s ...\n", name)
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster"})
	mc.SetName(name)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := confirmDeletion(ctx, out, c, mc); err != nil {
		return err
	}
	if err := c.Delete(ctx, mc); err != nil {
		return err
	}
	for _, obj := range []client.Object{mc, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}} {
		for {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s was not cleaned up: %w", obj.GetObjectKind().GroupVersionKind().Kind, name, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	var events eventsv1.EventList
	if err := c.List(ctx, &events); err != nil {
		return err
	}
	slices.SortStableFunc(events.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	for _, e := range events.Items {
		if e.Regarding.Kind == "ManagedCluster" && e.Regarding.Name == name {
			fmt.Fprintf(out, "  %-28s %s\n", e.Reason, e.Note)
		}
	}
	// What it did, object by object, is in its record, as kubectl cleanup
	// history prints it.
	records, err := record.List(ctx, c, record.DefaultNamespace, name)
	if err != nil {
		return err
	}
	for _, r := range records {
		for _, e := range r.Entries {
			if !r.DryRun {
				fmt.Fprintf(out, "  %-28s %-10s %s/%s\n", e.Step, e.Action, e.Resource, e.Name)
			}
		}
	}
	fmt.Fprintf(out, "ManagedCluster %s and its namespace are gone.\n", name)
	return nil
}

// confirmDeletion confirms the deletion of a cluster the sample policy
// protects, as kubectl cleanup confirm-delete does, and waits until the
// operator has accepted the confirmation.
func confirmDeletion(ctx context.Context, out io.Writer, c client.Client, mc *unstructured.Unstructured) error {
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(mc), mc); err != nil {
			return err
		}
		annotations := mc.GetAnnotations()
		at := annotations[v1alpha1.DeleteConfirmedAtAnnotation]
		switch {
		case mc.GetLabels()[v1alpha1.DeletionProtectedLabel] != "true":
			return nil
		case at != "" && annotations[v1alpha1.DeleteConfirmationAcceptedAnnotation] == at:
			fmt.Fprintf(out, "deletion of %s confirmed at %s\n", mc.GetName(), at)
			return nil
		case annotations[v1alpha1.DeleteConfirmedAnnotation] != mc.GetName() || at == "":
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, v1alpha1.DeleteConfirmedAnnotation, mc.GetName(),
				v1alpha1.DeleteConfirmedAtAnnotation, time.Now().UTC().Format(time.RFC3339))
			if err := c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the operator did not accept the deletion confirmation of %s: %w", mc.GetName(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitServed waits until the named CRDs are established.
func waitServed(ctx context.Context, c client.Client, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, name := range names {
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			established := slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			})
			if established {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s is not established: %w", name, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
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
