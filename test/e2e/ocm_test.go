package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/openshift/library-go/pkg/controller/controllercmd"
	"github.com/openshift/library-go/pkg/operator/events"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ocmfeature "open-cluster-management.io/api/feature"
	commonoptions "open-cluster-management.io/ocm/pkg/common/options"
	"open-cluster-management.io/ocm/pkg/features"
	registrationhub "open-cluster-management.io/ocm/pkg/registration/hub"
	workspoke "open-cluster-management.io/ocm/pkg/work/spoke"
)

// clusterName is the managed cluster whose work agent runs. Hub and managed
// cluster are one API server: the work agent applies the manifests of the
// ManifestWorks in namespace cluster1 to this same API server.
const clusterName = "cluster1"

// joined is the UID of the cluster1 the running scenario joined.
var joined types.UID

// ocmCleanupFinalizer is the finalizer OCM's registration hub puts on every
// ManagedCluster while its ResourceCleanup feature gate is on, and removes
// once its gc has deleted the cluster's add-ons and works.
const ocmCleanupFinalizer = "cluster.open-cluster-management.io/resource-cleanup"

// hubResourceCleanup says whether the running registration hub has the
// ResourceCleanup feature gate on (OCM's default).
var hubResourceCleanup bool

var addHubGates sync.Once

// startRegistrationHub runs OCM's registration hub controllers (cluster
// acceptance, the cluster namespace and RBAC, the lease controller that marks
// a silent cluster unavailable, add-on health, and with ResourceCleanup on,
// its default, the gc that deletes a deleted cluster's add-ons and works) as
// the identity cfg holds: registrationHubConfig's, OCM's service account with
// the RBAC OCM ships for it. Every other feature gate keeps OCM's default.
func startRegistrationHub(cfg *rest.Config, resourceCleanup bool) *component {
	addHubGates.Do(func() {
		Expect(features.HubMutableFeatureGate.Add(ocmfeature.DefaultHubRegistrationFeatureGates)).To(Succeed())
	})
	Expect(features.HubMutableFeatureGate.Set(fmt.Sprintf("%s=%t", ocmfeature.ResourceCleanup, resourceCleanup))).To(Succeed())
	hubResourceCleanup = resourceCleanup
	opts := registrationhub.NewHubManagerOptions()
	// The client rate limits of OCM's registration controller command (its
	// --kube-api-qps and --kube-api-burst defaults), as on a real hub.
	kubeConfig := rest.CopyConfig(cfg)
	common := commonoptions.NewOptions()
	kubeConfig.QPS, kubeConfig.Burst = common.QPS, common.Burst
	return runComponent("the registration hub", func(ctx context.Context) error {
		return opts.RunControllerManager(ctx, &controllercmd.ControllerContext{
			KubeConfig:    kubeConfig,
			EventRecorder: events.NewLoggingEventRecorder("registration-hub", clock.RealClock{}),
		})
	})
}

// withResourceCleanupOff runs a scenario on a registration hub restarted
// with the ResourceCleanup gate off, as a hub whose ClusterManager disables
// it, and restarts it on OCM's defaults afterwards, whatever the scenario's
// outcome.
func withResourceCleanupOff(scenario func()) func() {
	return func() {
		restartRegistrationHub(false)
		DeferCleanup(restartRegistrationHub, true)
		scenario()
	}
}

func restartRegistrationHub(resourceCleanup bool) {
	GinkgoHelper()
	hub.stop()
	hub = startRegistrationHub(hubConfig, resourceCleanup)
}

// workAgent is OCM's work agent of one cluster, started and stopped by the
// scenarios. Next to it runs what the registration agent does for the hub:
// renewing the cluster's lease and reporting it Available.
type workAgent struct {
	cfg           *rest.Config
	hubKubeconfig string
	cluster       string

	mu        sync.Mutex
	running   *component
	heartbeat *component
}

func newWorkAgent(cfg *rest.Config, hubKubeconfig, cluster string) *workAgent {
	Expect(features.SpokeMutableFeatureGate.Add(ocmfeature.DefaultSpokeWorkFeatureGates)).To(Succeed())
	return &workAgent{cfg: cfg, hubKubeconfig: hubKubeconfig, cluster: cluster}
}

// start runs the work agent if it is not running.
func (a *workAgent) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running != nil {
		return
	}
	opts := workspoke.NewWorkloadAgentOptions()
	opts.StatusSyncInterval = time.Second
	opts.WorkloadSourceDriver = "kube"
	opts.WorkloadSourceConfig = a.hubKubeconfig
	common := commonoptions.NewAgentOptions()
	common.SpokeClusterName = a.cluster
	config := workspoke.NewWorkAgentConfig(common, opts)
	a.running = runComponent("the work agent", func(ctx context.Context) error {
		return config.RunWorkloadAgent(ctx, &controllercmd.ControllerContext{
			KubeConfig:    rest.CopyConfig(a.cfg),
			EventRecorder: events.NewLoggingEventRecorder("work-agent", clock.RealClock{}),
		})
	})
}

// stopWork stops the work agent: works are no longer applied, and a deleted
// work keeps the agent's finalizer.
func (a *workAgent) stopWork() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running != nil {
		a.running.stop()
		a.running = nil
	}
}

// stop stops the work agent and the heartbeat.
func (a *workAgent) stop() {
	a.stopWork()
	a.stopHeartbeat()
}

// startHeartbeat renews the cluster's lease every second and keeps its
// Available condition True, as OCM's registration agent does.
func (a *workAgent) startHeartbeat() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.heartbeat != nil {
		return
	}
	a.heartbeat = runComponent("the heartbeat", func(ctx context.Context) error {
		for {
			renewLease(ctx, a.cluster)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	})
}

// stopHeartbeat stops renewing the lease: OCM's lease controller marks the
// cluster's Available condition Unknown after five lease durations.
func (a *workAgent) stopHeartbeat() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopHeartbeatLocked()
}

func (a *workAgent) stopHeartbeatLocked() {
	if a.heartbeat != nil {
		a.heartbeat.stop()
		a.heartbeat = nil
	}
}

func renewLease(ctx context.Context, cluster string) {
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: cluster, Name: "managed-cluster-lease"}, lease); err == nil {
		now := metav1.NowMicro()
		lease.Spec.RenewTime = &now
		_ = k8s.Update(ctx, lease)
	}
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &clusterv1.ManagedCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			return client.IgnoreNotFound(err)
		}
		if mc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionHubAccepted) ||
			meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable) {
			return nil
		}
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
			Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue,
			Reason: "ManagedClusterAvailable", Message: "Managed cluster is available",
		})
		return k8s.Status().Update(ctx, mc)
	})
}

// joinCluster creates the ManagedCluster cluster1 with the labels, accepted by
// the hub, waits until the registration hub created its namespace, starts
// the work agent and the heartbeat, and waits until the cluster is Available.
func joinCluster(labels map[string]string) *clusterv1.ManagedCluster {
	mc := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName, Labels: labels},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true, LeaseDurationSeconds: 1},
	}
	Expect(k8s.Create(ctx, mc)).To(Succeed())
	joined = mc.UID
	agent.start()
	agent.startHeartbeat()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionHubAccepted)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)).To(BeTrue())
		if hubResourceCleanup {
			g.Expect(mc.Finalizers).To(ContainElement(ocmCleanupFinalizer), "OCM's gc has not put its finalizer on cluster1")
		} else {
			g.Expect(mc.Finalizers).NotTo(ContainElement(ocmCleanupFinalizer), "OCM's ResourceCleanup gate is off")
		}
	}).Should(Succeed(), "the hub has not accepted cluster1, or it is not Available")
	return mc
}

// clusterAvailable returns the status of the cluster's Available condition.
func clusterAvailable(g Gomega) metav1.ConditionStatus {
	mc := &clusterv1.ManagedCluster{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: clusterName}, mc)).To(Succeed())
	if c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); c != nil {
		return c.Status
	}
	return ""
}

// clusterGone waits until the ManagedCluster is gone.
func clusterGone() {
	Eventually(func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Name: clusterName}, &clusterv1.ManagedCluster{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "cluster1 is still there")
}
