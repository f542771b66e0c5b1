package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
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
	logf.SetLogger(logs.wrap(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))))
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	auditDir, err := os.MkdirTemp("", "controller-audit-")
	Expect(err).NotTo(HaveOccurred())
	auditLog = filepath.Join(auditDir, "audit.log")
	env, err = testenv.StartWith(testenv.Options{AuditLog: auditLog, AuditPolicy: suiteAuditPolicy})
	Expect(err).NotTo(HaveOccurred())

	k8s, err = client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	Expect(err).NotTo(HaveOccurred())

	startManager()

	agent = newWorkAgent()
	go agent.run(ctx)
})

// auditLog is the API server's audit log: the writes of cluster status,
// with their request, and the writes to works, add-ons, clusters,
// namespaces, ConfigMaps and Events.
var auditLog string

const suiteAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  verbs: [update, patch]
  resources:
  - group: cluster.open-cluster-management.io
    resources: [managedclusters/status]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - group: work.open-cluster-management.io
    resources: [manifestworks]
  - group: addon.open-cluster-management.io
    resources: [managedclusteraddons]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - group: cluster.open-cluster-management.io
    resources: [managedclusters]
  - group: ""
    resources: [namespaces, configmaps, events]
  - group: events.k8s.io
    resources: [events]
- level: None
`

var running *testenv.Operator

// startManager runs the operator's manager, webhook included, as cmd/main.go
// sets it up, as an administrator.
func startManager() { startManagerAs(nil) }

// startManagerAs runs the manager with the given identity.
func startManagerAs(cfg *rest.Config) { startManagerWith(cfg, operator.Options{}) }

// startManagerWith runs the manager with the given identity and options.
func startManagerWith(cfg *rest.Config, opts operator.Options) {
	var err error
	running, err = env.StartOperatorWith(ctx, cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	op = running.Operator
}

// stopManager stops the manager and waits until it has stopped.
func stopManager() {
	Expect(running.Stop()).To(Succeed())
}

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
