package install_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// startAPIServer starts kube-apiserver and etcd from bin/ with the OCM and
// policy framework CRDs a hub has (bin/crds), but not the operator's: the
// chart installs it.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	crds, err := testenv.CRDsDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: testenv.BinDir(),
		CRDDirectoryPaths:     []string{filepath.Join(crds, "ocm"), filepath.Join(crds, "policy")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return cfg
}

// TestHelmInstallUpgradeUninstall installs the chart with Helm's library on
// a real API server, upgrades it with changed values, and uninstalls it:
// after each step every object the chart renders for the release's values
// is there, as the release's, and what the step removed is gone; the CRD
// outlives the release, as Helm keeps crds/.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	cfg := startAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	if err := helmInstall(ctx, cfg, releaseNamespace, nil); err != nil {
		t.Fatal(err)
	}
	installed := renderChart(t, nil)
	for _, o := range installed {
		if got := getObject(t, ctx, c, o); got != nil && o.kind() != "CustomResourceDefinition" {
			if got.GetAnnotations()["meta.helm.sh/release-name"] != releaseName {
				t.Errorf("%v is not the release's: annotations %v", o.key(), got.GetAnnotations())
			}
		}
	}

	upgradeValues := map[string]any{"replicas": 2, "extraArgs": []any{"--cluster-concurrency=20"}, "extraRBAC": []any{}}
	if err := helmUpgrade(ctx, cfg, releaseNamespace, upgradeValues); err != nil {
		t.Fatal(err)
	}
	upgraded := renderChart(t, upgradeValues)
	for _, o := range upgraded {
		getObject(t, ctx, c, o)
	}
	extra := installed.get(t, "ClusterRole", "cleanup-operator-manager-extra-resources")
	if _, ok := upgraded[extra.key()]; ok {
		t.Fatal("the upgrade's render still has the extra role")
	}
	wantGone(t, ctx, c, extra)
	deploy := getObject(t, ctx, c, upgraded.get(t, "Deployment", "cleanup-operator-controller-manager"))
	replicas, _, _ := unstructured.NestedInt64(deploy.Object, "spec", "replicas")
	args := stringArgs(object(deploy.Object))
	if replicas != 2 || !slices.Contains(args, "--cluster-concurrency=20") {
		t.Errorf("after the upgrade the Deployment has %d replicas and args %v", replicas, args)
	}

	if err := helmUninstall(cfg, releaseNamespace); err != nil {
		t.Fatal(err)
	}
	for _, o := range upgraded {
		if o.kind() == "CustomResourceDefinition" {
			getObject(t, ctx, c, o)
			continue
		}
		wantGone(t, ctx, c, o)
	}
}

// getObject reads the object o names from the API server; it fails the
// test and returns nil when it cannot.
func getObject(t *testing.T, ctx context.Context, c client.Client, o object) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o["apiVersion"].(string))
	u.SetKind(o.kind())
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace(), Name: o.name()}, u); err != nil {
		t.Errorf("%v: %v", o.key(), err)
		return nil
	}
	return u
}

// wantGone fails unless the API server has no object o names.
func wantGone(t *testing.T, ctx context.Context, c client.Client, o object) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o["apiVersion"].(string))
	u.SetKind(o.kind())
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace(), Name: o.name()}, u); !apierrors.IsNotFound(err) {
		t.Errorf("%v should be gone: %v", o.key(), err)
	}
}
