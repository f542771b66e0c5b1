package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	"open-cluster-management.io/ocm/pkg/registration/hub/gc"
)

// run is one contender's run on a control plane of its own.
type run struct {
	p      paths
	cp     *controlPlane
	admin  client.Client
	fleet  fleet
	mgrBin string
	// maxConcurrent is the teardown case's pace for operator-paced.
	maxConcurrent int
}

// instance is a started contender.
type instance struct {
	// pid is the process whose RSS is measured.
	pid int
	// inProcess says the contender runs in the harness's process, whose
	// RSS includes the harness, the simulated agent and their caches.
	inProcess bool
	// teardown runs once the clusters are deleted and returns when the
	// contender's teardown is done.
	teardown func(ctx context.Context) error
	stop     func()
	// note, when set, says what the contender alone measured.
	note func() string
}

// contender is one way of tearing the fleet's clusters down.
type contender struct {
	name, user string
	about      string
	start      func(ctx context.Context, r *run) (*instance, error)
}

var contenders = map[string]contender{
	"bare": {name: "bare loop, sequential", user: userBare,
		about: "per cluster in parallel: delete each object, one at a time, wait until the group is gone, next group, then the namespace",
		start: bareLoop(1, eachOne)},
	"bare16": {name: "bare loop, 16 deletes in flight", user: userBare,
		about: "as bare, with up to 16 deletes in flight per cluster",
		start: bareLoop(16, eachOne)},
	"bare16-watch": {name: "bare, 16 in flight, watching works", user: userBare,
		about: "as bare16, with a watch of every ManifestWork (whole objects, as the operator's cache watches them) read through the teardown: what a watcher costs the API server",
		start: withWorkWatch(false, bareLoop(16, eachOne))},
	"bare16-watch-meta": {name: "bare, 16 in flight, watching works' metadata", user: userBare,
		about: "as bare16-watch, the watch asking for metadata only (PartialObjectMetadata, protobuf)",
		start: withWorkWatch(true, bareLoop(16, eachOne))},
	"bare16-admission": {name: "bare, 16 in flight, operator's admission policies", user: userBare,
		about: "as bare16, with the operator's admission policies (config/admission) in force for " + admissionSettle.String() + " and no operator: what they cost the API server",
		start: withAdmission(bareLoop(16, eachOne))},
	"bare16-collection": {name: "bare, 16 in flight, last group in one request", user: userBare,
		about: "as bare16, the last group of each resource (all that remains of it in the namespace) in one deletecollection when it holds two objects or more, as the operator sends it: the request pattern's own time",
		start: bareLoop(16, lastGroupInOne)},
	"ocm": {name: "OCM gc controller", user: userOCM,
		about: "open-cluster-management.io/ocm v1.0.0 registration hub gc controller, in the harness process, with OCM's default client limits (50/100 and 100/200 QPS/burst for deletes)",
		start: startOCMGC},
	"operator": {name: "operator, defaults", user: userOperator,
		about: "the manager binary built from ./cmd, no flags beyond the address ones, the shipped RBAC, running as on a hub: its admission policies in force for " + admissionSettle.String(),
		start: startOperator(true)},
	"operator-cold": {name: "operator, defaults, just started", user: userOperator,
		about: "as operator, the clusters deleted as soon as it governs them: its admission policies are seconds old, so every group goes one by one",
		start: startOperator(false)},
	"operator-fast": {name: "operator, --kube-api-qps=5000 --kube-api-burst=5000", user: userOperator,
		about: "as operator, with the client limits lifted",
		start: startOperator(true, "--kube-api-qps=5000", "--kube-api-burst=5000")},
	"operator-paced": {name: "operator, paced", user: userOperator,
		about: "as operator, the policy's spec.blastRadius.maxConcurrent at the case's pace (50 for the storm): a storm torn down at the pace the hub chose",
		start: startOperatorPaced(true, -1)},
}

// contenderOrder is the order of the table's columns.
var contenderOrder = []string{"bare", "bare16", "bare16-watch", "bare16-watch-meta", "bare16-admission", "bare16-collection", "ocm", "operator", "operator-cold", "operator-fast", "operator-paced"}

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

// admissionSettle is the operator's AdmissionSettle (internal/controller)
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

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// startOCMGC runs OCM's registration hub gc controller as OCM's registration
// hub sets it up: a cluster client with OCM's default limits (QPS 50, burst
// 100), a metadata client for the deletes with twice that, the resource list
// of its default flags (add-ons, then works), one worker, and an event
// recorder writing Events to its namespace.
func startOCMGC(ctx context.Context, r *run) (*instance, error) {
	cfg, err := r.cp.user(userOCM, "system:masters")
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	metaCfg := rest.CopyConfig(cfg)
	metaCfg.QPS, metaCfg.Burst = cfg.QPS*2, cfg.Burst*2
	clusterClient, err := clusterclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	metadataClient, err := metadata.NewForConfig(metaCfg)
	if err != nil {
		return nil, err
	}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	const ns = "open-cluster-management-hub"
	if err := r.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	recorder := events.NewKubeRecorder(kubeClient.CoreV1().Events(ns), "registration-hub",
		&corev1.ObjectReference{Kind: "Deployment", Namespace: ns, Name: "cluster-manager-registration-controller", APIVersion: "apps/v1"},
		clock.RealClock{})
	informers := clusterinformers.NewSharedInformerFactory(clusterClient, 30*time.Minute)
	ctrl := gc.NewGCController(informers.Cluster().V1().ManagedClusters(), clusterClient, metadataClient, recorder,
		[]string{"addon.open-cluster-management.io/v1alpha1/managedclusteraddons", "work.open-cluster-management.io/v1/manifestworks"})
	gcCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	informers.Start(gcCtx.Done())
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctrl.Run(gcCtx, 1)
	}()
	stop := func() {
		cancel()
		wg.Wait()
		informers.Shutdown()
	}
	if err := waitFinalizer(ctx, r.admin, r.fleet.clusters, ocmGCFinalizer, 50*time.Millisecond); err != nil {
		stop()
		return nil, fmt.Errorf("waiting for OCM's gc controller to put its finalizer: %w", err)
	}
	return &instance{
		pid: os.Getpid(), inProcess: true,
		teardown: func(ctx context.Context) error { return waitClustersGone(ctx, r.admin) },
		stop:     stop,
	}, nil
}

// bareLoop deletes what the others delete, in the same order, with nothing
// else: per cluster (all at once), each group (the add-ons, then the works
// of each cleanup priority, lowest first), waiting until the group is gone,
// then the namespace. inFlight bounds the deletes in flight per cluster;
// style says whether a last group goes in one deletecollection.
func bareLoop(inFlight int, style bareGroups) func(ctx context.Context, r *run) (*instance, error) {
	return func(ctx context.Context, r *run) (*instance, error) {
		cfg, err := r.cp.user(userBare, "system:masters")
		if err != nil {
			return nil, err
		}
		cfg.QPS, cfg.Burst = -1, 0 // no client-side limit
		bare, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return &instance{
			pid: os.Getpid(), inProcess: true,
			teardown: func(ctx context.Context) error {
				errs := make(chan error, r.fleet.clusters)
				for i := range r.fleet.clusters {
					ns := clusterName(i)
					go func() { errs <- bareCluster(ctx, bare, kube, ns, inFlight, style, r.p.bareWaitsByWatch) }()
				}
				var first error
				for range r.fleet.clusters {
					first = firstErr(first, <-errs)
				}
				return first
			},
			stop: func() {},
		}, nil
	}
}

// bareGroups says how the bare loop sends a group.
type bareGroups int

const (
	eachOne        bareGroups = iota // every object in a delete of its own
	lastGroupInOne                   // the last group of a resource in one deletecollection (of minCollection or more)
)

// minCollection is the fewest objects the operator deletes in one
// deletecollection (decision.MinCollection): a smaller last group goes one
// by one.
const minCollection = 2

// priorities are the fleet's cleanup priorities, lowest first (absent: "").
var priorities = []string{"", "10", "20"}

func bareCluster(ctx context.Context, bare metadata.Interface, kube kubernetes.Interface, ns string, inFlight int, style bareGroups, byWatch bool) error {
	for _, gvr := range []string{"addons", "works"} {
		res := bare.Resource(addonGVR).Namespace(ns)
		if gvr == "works" {
			res = bare.Resource(workGVR).Namespace(ns)
		}
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		// Group by cleanup priority, lowest first (absent: 0).
		groups := map[string][]string{}
		for _, item := range list.Items {
			prio := item.Annotations[cleanupPriority]
			groups[prio] = append(groups[prio], item.Name)
		}
		last := ""
		for _, prio := range priorities {
			if len(groups[prio]) > 0 {
				last = prio
			}
		}
		for _, prio := range priorities {
			names := groups[prio]
			if len(names) == 0 {
				continue
			}
			var err error
			if style == lastGroupInOne && prio == last && len(names) >= minCollection {
				err = res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			} else {
				err = deleteEach(ctx, res, names, inFlight)
			}
			if err != nil {
				return err
			}
			if err := waitGone(ctx, res, prio, byWatch); err != nil {
				return err
			}
		}
	}
	return kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// deleteEach deletes the named objects, up to inFlight at a time, and
// returns the first error (an object already gone is none).
func deleteEach(ctx context.Context, res metadata.ResourceInterface, names []string, inFlight int) error {
	sem := make(chan struct{}, inFlight)
	errs := make(chan error, len(names))
	for _, name := range names {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			err := res.Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				errs <- err
			}
		}()
	}
	for range inFlight {
		sem <- struct{}{}
	}
	close(errs)
	return <-errs
}

// waitGone waits until no object of the cleanup priority prio remains:
// a list every 20 ms, or byWatch a list, then a watch from it.
func waitGone(ctx context.Context, res metadata.ResourceInterface, prio string, byWatch bool) error {
	for {
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		remaining := map[string]bool{}
		for _, item := range list.Items {
			if item.Annotations[cleanupPriority] == prio {
				remaining[item.Name] = true
			}
		}
		if len(remaining) == 0 {
			return nil
		}
		if !byWatch {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err := watchGone(ctx, res, list.ResourceVersion, remaining); err != nil {
			return err
		}
		// The watch ended (it may, at any time): list again.
	}
}

// watchGone watches from resourceVersion until every name of remaining is
// deleted or the watch ends.
func watchGone(ctx context.Context, res metadata.ResourceInterface, resourceVersion string, remaining map[string]bool) error {
	w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: resourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for len(remaining) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if m, isMeta := ev.Object.(*metav1.PartialObjectMetadata); isMeta && ev.Type == watch.Deleted {
				delete(remaining, m.Name)
			}
		}
	}
	return nil
}

// withAdmission creates the operator's admission policies and bindings as
// config/admission ships them, waits until they have been in force for
// admissionSettle, then starts the contender.
func withAdmission(start func(ctx context.Context, r *run) (*instance, error)) func(ctx context.Context, r *run) (*instance, error) {
	return func(ctx context.Context, r *run) (*instance, error) {
		files, err := filepath.Glob(filepath.Join(r.p.root, "config", "admission", "*.yaml"))
		if err != nil {
			return nil, err
		}
		n := 0
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			objs, err := yamlDocs[unstructured.Unstructured](f)
			if err != nil {
				return nil, err
			}
			for i := range objs {
				if err := r.admin.Create(ctx, &objs[i]); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("no admission policies in %s", filepath.Join(r.p.root, "config", "admission"))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(admissionSettle):
		}
		return start(ctx, r)
	}
}

// withWorkWatch starts a watch of every ManifestWork as the bare loop's
// user, whole objects or (metadataOnly) their metadata, and reads its
// events until the contender stops: the API server encodes and sends each
// event, as it does for the operator's cache.
func withWorkWatch(metadataOnly bool, start func(ctx context.Context, r *run) (*instance, error)) func(ctx context.Context, r *run) (*instance, error) {
	return func(ctx context.Context, r *run) (*instance, error) {
		cfg, err := r.cp.user(userBare, "system:masters")
		if err != nil {
			return nil, err
		}
		var works interface {
			Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
		}
		if metadataOnly {
			mc, err := metadata.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			works = mc.Resource(workGVR)
		} else {
			dc, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			works = dc.Resource(workGVR)
		}
		w, err := works.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		go func() {
			for range w.ResultChan() {
			}
		}()
		inst, err := start(ctx, r)
		if err != nil {
			w.Stop()
			return nil, err
		}
		stop := inst.stop
		inst.stop = func() { w.Stop(); stop() }
		return inst, nil
	}
}
