// Command fleetrss measures the memory of the manager binary as shipped on
// an idle fleet: it starts the test API server, creates N ManagedClusters
// with M ManifestWorks each (one ConfigMap manifest with 512 bytes of data,
// the size the goals name), builds ./cmd and runs it with its
// default flags (webhooks off, probes off), creates a CleanupPolicy that
// governs every cluster and has an orphaning rule (so that every work is
// evaluated), waits until every cluster is governed and the manager
// settles, and prints its peak and settled resident memory (VmHWM and
// VmRSS from /proc/<pid>/status), also per 1,000 works.
//
//	KUBEBUILDER_ASSETS=$PWD/bin CLEANUP_CRDS_DIR=$PWD/bin/crds go run ./hack/fleetrss -clusters 500 -works 10
//
// Linux only (it reads /proc). It measures what a pod's memory limit sees,
// not a heap inside a test process.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

var workGVK = schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork"}

// withStatus gives every work an applied work's status.
var withStatus bool

// selector is the policy's clusterSelector; empty selects every cluster.
var selector string

func main() {
	clusters := flag.Int("clusters", 500, "ManagedClusters in the fleet")
	works := flag.Int("works", 10, "ManifestWorks per cluster")
	settle := flag.Duration("settle", 15*time.Second, "how long to watch the manager once every cluster is governed")
	manager := flag.String("manager", "", "the manager binary; empty builds ./cmd")
	flag.BoolVar(&withStatus, "status", false, "give each work the status its agent would report once applied")
	flag.StringVar(&selector, "selector", "", "the policy's clusterSelector; it must select every cluster of the fleet")
	flag.Parse()
	logf.SetLogger(logr.Discard())
	if err := run(*clusters, *works, *settle, *manager); err != nil {
		fmt.Fprintln(os.Stderr, "fleetrss:", err)
		os.Exit(1)
	}
}

func run(clusters, works int, settle time.Duration, manager string) error {
	ctx := context.Background()
	if manager == "" {
		dir, err := os.MkdirTemp("", "fleetrss-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		manager = filepath.Join(dir, "manager")
		if err := buildManager(manager); err != nil {
			return err
		}
	}
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		return err
	}
	// The manager runs without its webhook server: take the test
	// environment's webhook registration away.
	if err := c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
		return err
	}
	start := time.Now()
	if err := createFleet(ctx, c, clusters, works); err != nil {
		return err
	}
	fmt.Printf("fleet: %d clusters x %d works created in %s\n", clusters, works, time.Since(start).Round(time.Second))
	return measure(ctx, c, manager, env.Kubeconfig, clusters, works, settle)
}

// buildManager builds ./cmd into out.
func buildManager(out string) error {
	build := exec.Command("go", "build", "-o", out, "./cmd")
	build.Dir, build.Stdout, build.Stderr = testenv.RepoRoot(), os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building ./cmd: %w", err)
	}
	return nil
}

// measure starts the manager on the fleet, creates the policy, waits until
// it governs every cluster, and prints the time, the manager's CPU and its
// memory.
func measure(ctx context.Context, c client.Client, manager, kubeconfig string, clusters, works int, settle time.Duration) error {
	cmd, logFile, err := startManager(manager, kubeconfig)
	if err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logFile.Close() }()
	pid := cmd.Process.Pid

	if err := c.Create(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}, Spec: v1alpha1.CleanupPolicySpec{
		ClusterSelector: selector,
		RemoveStrategy:  v1alpha1.RemoveStrategy{Default: v1alpha1.RemoveStrategyRequired},
		Orphaning:       []v1alpha1.OrphaningRule{{Name: "keep", When: "work.metadata.labels[?'keep'].orValue('') == 'yes'"}},
	}}); err != nil {
		return err
	}
	governedIn, err := waitGoverned(ctx, c, clusters, pid, logFile.Name())
	if err != nil {
		return err
	}
	// The CPU the manager spent from its start until every cluster was
	// governed: the fleet's first pass, read before the idle settle.
	governCPU, err := cpuTime(pid)
	if err != nil {
		return err
	}
	// A measurement, not a controller: watch the settled manager a while.
	time.Sleep(settle)
	hwm, rss, err := memory(pid)
	if err != nil {
		return err
	}
	total := float64(clusters * works)
	fmt.Printf("governed %d clusters in %s (manager CPU %.1f s); manager peak RSS (VmHWM) %.0f MiB, settled RSS (VmRSS) %.0f MiB\n",
		clusters, governedIn.Round(time.Second), governCPU.Seconds(), hwm, rss)
	if total > 0 {
		// The whole process over the works; subtract a run with -works 0
		// for what the works alone cost.
		fmt.Printf("per 1,000 works: peak %.1f MiB, settled %.1f MiB (%d works)\n", hwm/total*1000, rss/total*1000, int(total))
	}
	fmt.Printf("the manager's log: %s\n", logFile.Name())
	return nil
}

// startManager starts the manager binary on the test API server with its
// default flags, webhooks off, its output in a temporary log file.
func startManager(manager, kubeconfig string) (*exec.Cmd, *os.File, error) {
	cmd := exec.Command(manager, "--kubeconfig", kubeconfig, "--health-probe-bind-address=0")
	cmd.Env = append(os.Environ(), "ENABLE_WEBHOOKS=false")
	logFile, err := os.CreateTemp("", "fleetrss-manager-*.log")
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, nil, err
	}
	return cmd, logFile, nil
}

// waitGoverned waits until the policy governs every cluster and returns
// how long that took; it gives up after 15 minutes or when the manager exits.
func waitGoverned(ctx context.Context, c client.Client, clusters, pid int, log string) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(15 * time.Minute)
	for {
		n, err := governed(ctx, c)
		if err != nil {
			return 0, err
		}
		if n == clusters {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d clusters governed after 15 minutes; the manager's log: %s", n, clusters, log)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return 0, fmt.Errorf("the manager exited; its log: %s", log)
		}
		time.Sleep(time.Second)
	}
}

// createFleet creates the clusters with their namespaces and works, 32 at a
// time.
func createFleet(ctx context.Context, c client.Client, clusters, works int) error {
	data := strings.Repeat("x", 512)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, 32)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	for i := range clusters {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fmt.Sprintf("fleet-%04d", i)
			mc := &unstructured.Unstructured{}
			mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
			mc.SetKind("ManagedCluster")
			mc.SetName(name)
			_ = unstructured.SetNestedField(mc.Object, true, "spec", "hubAcceptsClient")
			if err := c.Create(ctx, mc); err != nil {
				fail(err)
				return
			}
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				fail(err)
				return
			}
			for j := range works {
				w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"workload": map[string]any{"manifests": []any{
					map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
						"metadata": map[string]any{"name": fmt.Sprint("cm-", j), "namespace": "default"},
						"data":     map[string]any{"payload": data}},
				}}}}}
				w.SetGroupVersionKind(workGVK)
				w.SetNamespace(name)
				w.SetName(fmt.Sprintf("work-%03d", j))
				if err := c.Create(ctx, w); err != nil {
					fail(err)
					return
				}
				if withStatus {
					if err := setStatus(ctx, c, w, j); err != nil {
						fail(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return first
}

// setStatus writes the status a work agent reports once it applied the
// work's ConfigMap: the work's conditions, and the manifest's resource, its
// conditions and its status feedback.
func setStatus(ctx context.Context, c client.Client, w *unstructured.Unstructured, j int) error {
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(typ, reason, message string) any {
		return map[string]any{"type": typ, "status": "True", "reason": reason, "message": message,
			"observedGeneration": w.GetGeneration(), "lastTransitionTime": now}
	}
	w.Object["status"] = map[string]any{
		"conditions": []any{
			cond("Applied", "AppliedManifestWorkComplete", "Apply manifest work complete"),
			cond("Available", "ResourcesAvailable", "All resources are available"),
		},
		"resourceStatus": map[string]any{"manifests": []any{map[string]any{
			"resourceMeta": map[string]any{"ordinal": int64(0), "group": "", "version": "v1", "kind": "ConfigMap",
				"resource": "configmaps", "name": fmt.Sprint("cm-", j), "namespace": "default"},
			"conditions": []any{
				cond("Applied", "AppliedManifestComplete", "Apply manifest complete"),
				cond("Available", "ResourceAvailable", "Resource is available"),
				cond("StatusFeedbackSynced", "StatusFeedbackSynced", ""),
			},
			"statusFeedback": map[string]any{},
		}}},
	}
	return c.Status().Update(ctx, w)
}

// governed counts the clusters a policy governs.
func governed(ctx context.Context, c client.Client) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedClusterList"})
	if err := c.List(ctx, list); err != nil {
		return 0, err
	}
	n := 0
	for _, mc := range list.Items {
		if mc.Annotations[v1alpha1.GoverningPolicyAnnotation] != "" {
			n++
		}
	}
	return n, nil
}

// memory reads VmHWM and VmRSS of a process, in MiB.
func memory(pid int) (hwm, rss float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmHWM:":
			hwm = kb / 1024
		case "VmRSS:":
			rss = kb / 1024
		}
	}
	return hwm, rss, s.Err()
}

// cpuTime is the user and system CPU time a process has used so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	_, rest, ok := strings.Cut(string(raw), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, raw)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
