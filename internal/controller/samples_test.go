package controller_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// kubectlDryRun runs kubectl apply --dry-run=server with args (a file alone
// is passed with -f) against the suite's API server.
func kubectlDryRun(args ...string) (string, error) {
	if len(args) == 1 {
		args = []string{"-f", args[0]}
	}
	cmd := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), append([]string{"--kubeconfig", env.Kubeconfig,
		"apply", "--dry-run=server"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sampleDir is a folder of config/samples: its YAML files, each of which its
// kustomization must list.
type sampleDir struct {
	rel   string // relative to config/samples
	files []string
}

// sampleDirs returns config/samples and every folder below it.
func sampleDirs(root string) []sampleDir {
	var dirs []sampleDir
	Expect(filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dir := sampleDir{rel: rel}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() && e.Name() != "kustomization.yaml" {
				Expect(e.Name()).To(HaveSuffix(".yaml"), "config/samples/%s: samples are YAML files", rel)
				dir.files = append(dir.files, e.Name())
			}
		}
		dirs = append(dirs, dir)
		return nil
	})).To(Succeed())
	return dirs
}

// kustomizationResources reads the resources a folder's kustomization lists.
func kustomizationResources(dir string) []string {
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	Expect(err).NotTo(HaveOccurred(), "%s needs a kustomization.yaml", dir)
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	Expect(yaml.Unmarshal(raw, &kustomization)).To(Succeed())
	return kustomization.Resources
}

// serveACMAPIs installs the stand-in CRDs of the APIs the ACM example
// monitors (Hive's ClusterDeployment, the application lifecycle's
// Subscription), as run-local does, and removes them when the spec ends.
func serveACMAPIs() {
	file := filepath.Join(testenv.RepoRoot(), "hack", "run-local", "apis.yaml")
	Expect(testenv.CreateFromFile(ctx, k8s, file)).To(Succeed())
	objs, err := testenv.ObjectsFromFile(file)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		for _, o := range objs {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, o))).To(Succeed())
		}
	})
	for _, o := range objs {
		Eventually(func(g Gomega) {
			var crd apiextensionsv1.CustomResourceDefinition
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), &crd)).To(Succeed())
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}
			g.Expect(established).To(BeTrue(), "%s not established", o.GetName())
		}).Should(Succeed())
	}
}

var _ = Describe("the samples", func() {
	It("pass kubectl apply --dry-run=server, file by file and folder by folder, and are safe outside acm/", func() {
		serveACMAPIs()
		root := filepath.Join(testenv.RepoRoot(), "config", "samples")
		dirs := sampleDirs(root)
		Expect(len(dirs)).To(BeNumerically(">=", 3), "config/samples, examples/ and acm/")
		policies := 0
		for _, dir := range dirs {
			path := filepath.Join(root, dir.rel)
			Expect(kustomizationResources(path)).To(ConsistOf(dir.files),
				"config/samples/%s/kustomization.yaml must list every sample of its folder, and only those", dir.rel)
			for _, f := range dir.files {
				out, err := kubectlDryRun(filepath.Join(path, f))
				Expect(err).NotTo(HaveOccurred(), "%s/%s: %s", dir.rel, f, out)
				Expect(out).To(ContainSubstring("(server dry run)"), f)
				if dir.rel != "acm" {
					policies += expectSafe(filepath.Join(path, f))
				}
			}
			out, err := kubectlDryRun("-k", path)
			Expect(err).NotTo(HaveOccurred(), "config/samples/%s: %s", dir.rel, out)
			Expect(strings.Count(out, "(server dry run)")).To(BeNumerically(">=", len(dir.files)))
		}
		Expect(policies).To(BeNumerically(">=", 5), "the starter and the examples")

		// Nothing was created by the dry runs.
		var list v1alpha1.CleanupPolicyList
		Expect(k8s.List(ctx, &list)).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})
})

// expectSafe checks that every CleanupPolicy of a sample file is a dry run
// with a selector, and every ManagedCluster one the hub does not accept, and
// returns how many policies it holds.
func expectSafe(file string) int {
	objs, err := testenv.ObjectsFromFile(file)
	Expect(err).NotTo(HaveOccurred())
	policies := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "CleanupPolicy":
			raw, err := yaml.Marshal(o.Object)
			Expect(err).NotTo(HaveOccurred())
			var p v1alpha1.CleanupPolicy
			Expect(yaml.UnmarshalStrict(raw, &p)).To(Succeed(), file)
			Expect(p.Spec.DryRun).To(BeTrue(), "%s: policy %s must be a dry run", file, p.Name)
			Expect(p.Spec.ClusterSelector).To(ContainSubstring("cleanup.fleetops.dev/"),
				"%s: policy %s must select only clusters labelled for it", file, p.Name)
			policies++
		case "ManagedCluster":
			Expect(o.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("hubAcceptsClient", false)),
				"%s: ManagedCluster %s must not be accepted", file, o.GetName())
		default:
			Fail(file + ": unexpected kind " + o.GetKind())
		}
	}
	return policies
}
