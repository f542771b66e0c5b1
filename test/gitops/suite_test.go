package gitops

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The suite runs the operator's manager, webhook included, on a real
// kube-apiserver and etcd with the OCM and policy CRDs, and reads what it
// writes as GitOps tools do: through kubectl, kstatus and the Argo CD
// health check.
var (
	env     *testenv.Env
	k8s     client.Client
	ctx     context.Context
	cancel  context.CancelFunc
	running *testenv.Operator
)

func TestGitOps(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "GitOps suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// The operator and the API server work in their own time on a busy
	// machine: wait for them, never sleep.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	startManager()
})

var _ = AfterSuite(func() {
	if running != nil {
		Expect(running.Stop()).To(Succeed())
	}
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// startManager runs the operator's manager, webhook included, as
// cmd/main.go sets it up, and returns once the webhook serves.
func startManager() {
	var err error
	running, err = env.StartOperator(ctx, nil)
	Expect(err).NotTo(HaveOccurred())
}

// stopManager stops the manager and waits until it has stopped: nothing
// reconciles until startManager.
func stopManager() {
	Expect(running.Stop()).To(Succeed())
	running = nil
}
