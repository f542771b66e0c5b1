package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"bare16-collection": {name: "bare, each group in one request", user: userBare,
		about: "as bare16, each group of a resource in one deletecollection (two objects or more) that leaves the later groups out by name, awaited before the next, as the operator sends it: the request pattern's own time",
		start: bareLoop(16, eachGroupInOne)},
	"bare16-guarded": {name: "bare, each group in one request, guarded", user: userBare,
		about: "as bare16-collection, with the operator's admission policies in force for " + admissionSettle.String() + " and a watch of every ManifestWork's metadata: the least any operator keeping the same guarantees and reacting by watch adds to the requests, with no operator process",
		start: withAdmission(withWorkWatch(true, bareLoop(16, eachGroupInOne)))},
	"bare16-guarded-full": {name: "bare, each group in one request, guarded, whole works watched", user: userBare,
		about: "as bare16-guarded, the watch reading whole works, as the operator's cache does: what the whole objects cost over their metadata",
		start: withAdmission(withWorkWatch(false, bareLoop(16, eachGroupInOne)))},
	"ocm": {name: "OCM gc controller", user: userOCM,
		about: "open-cluster-management.io/ocm v1.0.0 registration hub gc controller, in the harness process, with OCM's default client limits (50/100 and 100/200 QPS/burst for deletes)",
		start: startOCMGC},
	"operator": {name: "operator, defaults", user: userOperator,
		about: "the manager binary (built from ./cmd unless BENCH_MANAGER names one), no flags beyond the address ones, the shipped RBAC, running as on a hub: its admission policies in force for " + admissionSettle.String(),
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
var contenderOrder = []string{"bare", "bare16", "bare16-watch", "bare16-watch-meta", "bare16-admission", "bare16-collection", "bare16-guarded", "bare16-guarded-full", "ocm", "operator", "operator-cold", "operator-fast", "operator-paced"}

// firstErr is the first of errs that is not nil.
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
