package install_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestControlPlaneVersion checks that the control plane of bin/ (make
// envtest-bins) reports the release of k8s.io/kubernetes that
// hack/tools/kube/go.mod pins, in a form clients parse: `kubectl version`
// exits 0 and names it for client and server, and Helm's server-side dry
// run of the chart passes the chart's kubeVersion.
func TestControlPlaneVersion(t *testing.T) {
	want := kubeModuleVersion(t)
	cfg := startAPIServer(t)

	t.Run("kubectl version", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "version", "-o", "json",
			"--kubeconfig", writeKubeconfig(t, cfg))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl version: %v\n%s%s", err, out, stderr.String())
		}
		var got struct {
			ClientVersion struct{ GitVersion, Major, Minor string }
			ServerVersion struct{ GitVersion, Major, Minor string }
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("kubectl version's output: %v\n%s", err, out)
		}
		major, minor := majorMinor(t, want)
		for side, v := range map[string]struct{ GitVersion, Major, Minor string }{
			"client": got.ClientVersion, "server": got.ServerVersion,
		} {
			if v.GitVersion != want || v.Major != major || v.Minor != minor {
				t.Errorf("kubectl's %s version is %+v, want gitVersion %s, major %s, minor %s (rebuild bin/ with make envtest-bins)",
					side, v, want, major, minor)
			}
		}
		if stderr.Len() > 0 {
			t.Errorf("kubectl version warns: %s", stderr.String())
		}
	})

	t.Run("helm install --dry-run=server", func(t *testing.T) {
		cfgHelm, ch, err := helmSetup(cfg, releaseNamespace)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.KubeVersion == "" {
			t.Fatal("the chart states no kubeVersion: there is nothing to check")
		}
		install := action.NewInstall(cfgHelm)
		install.ReleaseName, install.Namespace, install.CreateNamespace = releaseName, releaseNamespace, true
		install.DryRun, install.DryRunOption = true, "server"
		rel, err := install.RunWithContext(context.Background(), ch, nil)
		if err != nil {
			t.Fatalf("helm install --dry-run=server on Kubernetes %s: %v", want, err)
		}
		if rel.Manifest == "" {
			t.Error("the dry run rendered no objects")
		}
	})
}

// kubeModuleVersion is the version of k8s.io/kubernetes that
// hack/tools/kube/go.mod pins, as hack/tools/kube/build.sh reads it.
func kubeModuleVersion(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(testenv.RepoRoot(), "hack", "tools", "kube")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/kubernetes in %s: %v", cmd.Dir, err)
	}
	return strings.TrimSpace(string(out))
}

// majorMinor are the major and minor numbers of a version vX.Y.Z.
func majorMinor(t *testing.T, version string) (string, string) {
	t.Helper()
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 3 {
		t.Fatalf("%q is no vX.Y.Z version", version)
	}
	return parts[0], parts[1]
}

// writeKubeconfig writes a kubeconfig file for the API server and user of
// cfg, for command-line clients.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData,
		ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		t.Fatal(err)
	}
	return file
}
