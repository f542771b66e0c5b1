package operator_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetops-dev/cleanup-operator/internal/operator"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// env is the one API server of the package's tests: a hub set up by OCM's
// quick start, without the optional CRDs. A test that needs another set of
// CRDs installs or removes them, and puts them back when it ends.
var (
	env *testenv.Env
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{WithoutCRDs: optionalCRDs}, func(e *testenv.Env) (err error) {
		env = e
		k8s, err = client.New(e.Config, client.Options{Scheme: operator.NewScheme()})
		return err
	}))
}

// withoutCRDs removes the named CRDs and waits until they are gone; they
// are installed again when the test ends.
func withoutCRDs(t *testing.T, g *WithT, names ...string) {
	t.Helper()
	crds, err := testenv.CRDsNamed(names...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(envtest.UninstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds})).To(Succeed())
	t.Cleanup(func() { installCRDs(t, names...) })
	for _, name := range names {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}))
		}, 60*time.Second, 100*time.Millisecond).Should(BeTrue(), "CRD %s still there", name)
	}
}

// installCRDs installs the named CRDs and waits until they are served.
func installCRDs(t *testing.T, names ...string) {
	t.Helper()
	g := NewWithT(t)
	crds, err := testenv.CRDsNamed(names...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds})).NotTo(BeEmpty())
}
