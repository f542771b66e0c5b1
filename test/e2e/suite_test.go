package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// The suite: one kube-apiserver and etcd that are both the hub and the
// managed cluster cluster1, as OCM's own integration tests run them, with
//   - kube-controller-manager (namespace and garbage-collector controllers),
//   - OCM's registration hub controllers on OCM's default feature gates
//     (ResourceCleanup on: OCM's gc cleans up deleted clusters; one scenario
//     restarts them with it off), as OCM's service account
//     registration-controller-sa with the ClusterRole OCM ships for it, so
//     admission sees OCM's own identity, and the work agent of cluster1, in
//     this process,
//   - the governance-policy-propagator, as the bin/e2e-propagator process,
//   - the operator, bin/manager, as a process with the RBAC it ships with.
//
// Logs of every component go to bin/e2e-logs.
var (
	ctx    context.Context
	cancel context.CancelFunc

	env      *envtest.Environment
	adminCfg *rest.Config
	// hubConfig is the registration hub's: OCM's service account, bound to
	// the ClusterRole OCM ships for it.
	hubConfig *rest.Config
	k8s       client.Client

	paths repoPaths
	// adminKubeconfig is a cluster administrator's kubeconfig, for kubectl
	// and the kubectl-cleanup plugin.
	adminKubeconfig string
	logDir          string
	kcm             *process
	manager         *process
	hub             *component
	agent           *workAgent
	prop            *process
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "cleanup-operator end to end on OCM")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)

	var err error
	paths, err = findRepoPaths()
	Expect(err).NotTo(HaveOccurred())
	logDir = filepath.Join(paths.bin, "e2e-logs")
	Expect(os.RemoveAll(logDir)).To(Succeed())
	Expect(os.MkdirAll(logDir, 0o755)).To(Succeed())
	routeLogs()

	By("starting kube-apiserver and etcd with the OCM, policy and CleanupPolicy CRDs")
	crds, err := crdPaths(paths)
	Expect(err).NotTo(HaveOccurred())
	env = &envtest.Environment{
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: paths.bin,
	}
	configureAudit()
	adminCfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(adminCfg, client.Options{Scheme: newScheme()})
	Expect(err).NotTo(HaveOccurred())
	adminKubeconfig = writeKubeconfig(envtest.User{Name: adminUser, Groups: []string{"system:masters"}}, "admin.kubeconfig")

	By("starting kube-controller-manager: namespace and garbage-collector controllers")
	kcm, err = startProcess("kube-controller-manager", filepath.Join(paths.bin, "kube-controller-manager"), nil,
		"--kubeconfig="+adminKubeconfig,
		"--controllers=namespace,garbagecollector",
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"-v=1",
	)
	Expect(err).NotTo(HaveOccurred())
	checkControllerManager()

	prepareFleet()

	By("starting OCM's registration hub controllers as OCM's service account, on OCM's default feature gates")
	hubConfig = registrationHubConfig()
	hub = startRegistrationHub(hubConfig, true)

	By("starting OCM's work agent for cluster1")
	agent = newWorkAgent(adminCfg, adminKubeconfig, clusterName)
	agent.start()

	By("starting the governance-policy-propagator")
	prop = startPropagator()

	By("starting the operator, bin/manager, with the RBAC it ships with")
	operatorConfig = operatorKubeconfig()
	startOperator("manager")
})

// adminUser is the cluster administrator of adminKubeconfig, which
// kube-controller-manager (its namespace controller), the work agent's hub
// side and the kubectl plugin run as.
const adminUser = "e2e-admin"

// operatorConfig is the operator's kubeconfig, bound to the RBAC it ships with.
var operatorConfig string

// startOperator starts bin/manager with the RBAC it ships with; name names
// its log in bin/e2e-logs.
func startOperator(name string) {
	GinkgoHelper()
	var err error
	manager, err = startProcess(name, filepath.Join(paths.bin, "manager"),
		[]string{"ENABLE_WEBHOOKS=false"},
		"--kubeconfig="+operatorConfig,
		"--health-probe-bind-address=0",
		"--metrics-bind-address=0",
		"--leader-elect=false",
	)
	Expect(err).NotTo(HaveOccurred())
	waitForOperator()
}

var _ = AfterSuite(func() {
	if manager != nil {
		manager.stop()
	}
	if prop != nil {
		prop.stop()
	}
	if agent != nil {
		agent.stop()
	}
	if hub != nil {
		hub.stop()
	}
	if kcm != nil {
		kcm.stop()
	}
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
	fmt.Fprintf(GinkgoWriter, "component logs: %s\n", logDir)
})

// routeLogs sends the in-process components' logs (klog, and
// controller-runtime's logger) to bin/e2e-logs/ocm.log, so the test output
// shows the scenarios and their timelines only.
func routeLogs() {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	Expect(klogFlags.Set("logtostderr", "false")).To(Succeed())
	Expect(klogFlags.Set("alsologtostderr", "false")).To(Succeed())
	Expect(klogFlags.Set("stderrthreshold", "FATAL")).To(Succeed())
	Expect(klogFlags.Set("v", "2")).To(Succeed())
	ocmLog := logFile("ocm.log")
	klog.SetOutput(ocmLog)
	logf.SetLogger(zap.New(zap.WriteTo(ocmLog), zap.UseDevMode(true)))
}

func logFile(name string) *os.File {
	f, err := os.Create(filepath.Join(logDir, name))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(f.Close)
	return f
}

// writeKubeconfig writes a kubeconfig for a user of the test API server into
// the log folder and returns its path.
func writeKubeconfig(user envtest.User, name string) string {
	u, err := env.AddUser(user, nil)
	Expect(err).NotTo(HaveOccurred())
	raw, err := u.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(logDir, name)
	Expect(os.WriteFile(path, raw, 0o600)).To(Succeed())
	return path
}
