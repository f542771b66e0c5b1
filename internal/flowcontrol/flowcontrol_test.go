package flowcontrol_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetops-dev/cleanup-operator/internal/flowcontrol"
	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The tests run against a real kube-apiserver, whose Priority and Fairness
// classifies every request, started once for the package.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf.SetLogger(logr.Discard())
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
		}
	}()
	return m.Run()
}

// as returns a client and a rest config authenticated as user, bound to
// cluster-admin. Not in system:masters: the API server exempts that group
// from Priority and Fairness.
func as(t *testing.T, user string) (client.Client, *rest.Config) {
	t.Helper()
	u, err := env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := u.Config()
	c, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-admin-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := admin.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	// RBAC reads bindings from an informer: wait until the user may act.
	NewWithT(t).Eventually(func() error {
		return c.List(t.Context(), &flowcontrolv1.FlowSchemaList{})
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return c, cfg
}

func testContext(t *testing.T) context.Context {
	return logf.IntoContext(t.Context(), testr.New(t))
}

// The tests share the cluster-scoped objects; they run in order.
func TestEnsure(t *testing.T) {
	t.Run("a client that is not a service account gets nothing", func(t *testing.T) {
		g := NewWithT(t)
		admin, _ := as(t, "jane")
		ours, err := flowcontrol.Ensure(testContext(t), admin)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ours).To(BeFalse())
		err = admin.Get(t.Context(), client.ObjectKey{Name: flowcontrol.Name}, &flowcontrolv1.FlowSchema{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		err = admin.Get(t.Context(), client.ObjectKey{Name: flowcontrol.Name}, &flowcontrolv1.PriorityLevelConfiguration{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	t.Run("the service account's requests are classified into the operator's level", func(t *testing.T) {
		g := NewWithT(t)
		c, cfg := as(t, "system:serviceaccount:cleanup-operator-system:cleanup-operator-controller-manager")
		ours, err := flowcontrol.Ensure(testContext(t), c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ours).To(BeTrue())

		fs := &flowcontrolv1.FlowSchema{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: flowcontrol.Name}, fs)).To(Succeed())
		g.Expect(fs.Spec.Rules).To(HaveLen(1))
		g.Expect(fs.Spec.Rules[0].Subjects).To(ConsistOf(flowcontrolv1.Subject{
			Kind: flowcontrolv1.SubjectKindServiceAccount,
			ServiceAccount: &flowcontrolv1.ServiceAccountSubject{
				Namespace: "cleanup-operator-system", Name: "cleanup-operator-controller-manager",
			},
		}))
		level := &flowcontrolv1.PriorityLevelConfiguration{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: flowcontrol.Name}, level)).To(Succeed())
		g.Expect(level.Spec.Type).To(Equal(flowcontrolv1.PriorityLevelEnablementLimited))

		// The API server names, in every response, the FlowSchema and the
		// priority level that classified the request: once its flow
		// control has read the new objects, they are the operator's.
		hc, err := rest.HTTPClientFor(cfg)
		g.Expect(err).NotTo(HaveOccurred())
		classified := func(g Gomega) (string, string) {
			resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/api/v1/namespaces/default/configmaps")
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
		}
		g.Eventually(func(g Gomega) {
			schema, lvl := classified(g)
			g.Expect(schema).To(Equal(string(fs.UID)))
			g.Expect(lvl).To(Equal(string(level.UID)))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		// Another client is not.
		_, otherCfg := as(t, "system:serviceaccount:default:someone-else")
		ohc, err := rest.HTTPClientFor(otherCfg)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := ohc.Get(strings.TrimSuffix(otherCfg.Host, "/") + "/api/v1/namespaces/default/configmaps")
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")).NotTo(BeEmpty())
		g.Expect(resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")).NotTo(Equal(string(fs.UID)))
	})

	t.Run("asking who it is needs no permission", func(t *testing.T) {
		g := NewWithT(t)
		u, err := env.AddUser(envtest.User{Name: "system:serviceaccount:elsewhere:unbound"}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		c, err := client.New(u.Config(), client.Options{Scheme: operator.NewScheme()})
		g.Expect(err).NotTo(HaveOccurred())
		// The review passes (every authenticated user may create one);
		// reading the FlowSchema is what this account may not do.
		_, err = flowcontrol.Ensure(testContext(t), c)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(err.Error()).To(ContainSubstring("getting PriorityLevelConfiguration"))
	})

	t.Run("an administrator's edits stay", func(t *testing.T) {
		g := NewWithT(t)
		c, _ := as(t, "system:serviceaccount:cleanup-operator-system:cleanup-operator-controller-manager")
		level := &flowcontrolv1.PriorityLevelConfiguration{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: flowcontrol.Name}, level)).To(Succeed())
		level.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](3)
		g.Expect(c.Update(t.Context(), level)).To(Succeed())

		ours, err := flowcontrol.Ensure(testContext(t), c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ours).To(BeTrue())
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: flowcontrol.Name}, level)).To(Succeed())
		g.Expect(level.Spec.Limited.NominalConcurrencyShares).To(HaveValue(BeEquivalentTo(3)))
	})
}
