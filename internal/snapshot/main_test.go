package snapshot_test

import (
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The tests of this package that read through an API server share one,
// each with objects of names of its own.
var (
	env *testenv.Env
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(e *testenv.Env) (err error) {
		env = e
		k8s, err = client.New(e.Config, client.Options{Scheme: scheme.New()})
		return err
	}))
}
