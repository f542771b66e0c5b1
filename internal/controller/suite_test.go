package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The suite runs the operator's manager, webhook included, against a real
// kube-apiserver and etcd with the OCM and policy CRDs installed, and
// asserts through a client of its own.
var (
	env    *testenv.Env
	agent  *workAgent
	k8s    client.Client
	op     *operator.Operator
	ctx    context.Context
	cancel context.CancelFunc
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())

	k8s, err = client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	Expect(err).NotTo(HaveOccurred())

	startManager()

	agent = newWorkAgent()
	go agent.run(ctx)
})

var (
	stopMgr func()
	mgrDone chan struct{}
)

// startManager runs the operator's manager, webhook included, as cmd/main.go
// sets it up, as an administrator.
func startManager() { startManagerAs(env.Config) }

// startManagerAs runs the manager with the given identity.
func startManagerAs(cfg *rest.Config) {
	opts := env.ManagerOptions(operator.ManagerOptions())
	// A test restarts the manager in this process: the new one registers
	// controllers of the same names.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	mgrCtx, cancel := context.WithCancel(ctx)
	op, err = operator.Setup(mgrCtx, mgr, operator.Options{EnableWebhooks: true})
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()
	stopMgr, mgrDone = cancel, done
	Expect(env.WaitForWebhook(ctx)).To(Succeed())
}

// stopManager stops the manager and waits until it has stopped.
func stopManager() {
	stopMgr()
	<-mgrDone
}

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
