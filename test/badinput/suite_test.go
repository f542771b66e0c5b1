package badinput

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The suite runs on one control plane: a real kube-apiserver and etcd with
// the operator's CRD, the OCM and policy CRDs, and the CleanupPolicy
// webhook registered. The operator's manager runs in this process.
var (
	env     *testenv.Env
	k8s     client.Client
	ctx     context.Context
	cancel  context.CancelFunc
	running *testenv.Operator
	// webhooks are the webhook configurations envtest installed, kept to
	// put the webhook back in the path.
	webhooks []admissionregistrationv1.ValidatingWebhookConfiguration
)

func TestBadInput(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Bad input suite")
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
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	Expect(k8s.List(ctx, &list)).To(Succeed())
	Expect(list.Items).NotTo(BeEmpty())
	webhooks = list.Items
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

// startManager runs the operator's manager as cmd/main.go sets it up.
func startManager() {
	var err error
	running, err = env.StartOperator(ctx, nil)
	Expect(err).NotTo(HaveOccurred())
}

// stopManager stops the manager and waits until it has stopped.
func stopManager() {
	Expect(running.Stop()).To(Succeed())
	running = nil
}

// webhookOff takes the CleanupPolicy webhook out of the API server's path:
// only the CRD schema validates what is stored.
func webhookOff() {
	for i := range webhooks {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, webhooks[i].DeepCopy()))).To(Succeed())
	}
	// The API server drops the webhook in its own time.
	Eventually(webhookProbe).Should(Succeed())
}

// webhookOn puts the webhook back in the path.
func webhookOn() {
	for i := range webhooks {
		w := webhooks[i].DeepCopy()
		w.ResourceVersion, w.UID = "", ""
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, w))).To(Succeed())
	}
	Eventually(webhookProbe).ShouldNot(Succeed())
}

// webhookProbe creates, in a dry run, a policy that only the webhook refuses.
func webhookProbe() error {
	p := cleanupPolicy("webhook-probe")
	p.Object["spec"] = map[string]any{"clusterSelector": "not CEL (", "removeStrategy": map[string]any{"default": "Required"}}
	return k8s.Create(ctx, p, client.DryRunAll)
}
