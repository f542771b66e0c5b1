package gitops

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// documented is a CleanupPolicy shown in a Markdown file.
type documented struct {
	where  string // file:line of its code block
	object map[string]any
}

// documentedPolicies returns every CleanupPolicy in the ```yaml blocks of
// the README and of docs/.
func documentedPolicies() []documented {
	files := []string{filepath.Join(testenv.RepoRoot(), "README.md")}
	Expect(filepath.WalkDir(filepath.Join(testenv.RepoRoot(), "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})).To(Succeed())
	var out []documented
	for _, f := range files {
		raw, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		rel, _ := filepath.Rel(testenv.RepoRoot(), f)
		for line, block := range yamlBlocks(raw) {
			for _, doc := range strings.Split("\n"+block, "\n---") {
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
					continue // a fragment, not an object
				}
				if apiVersion, _ := obj["apiVersion"].(string); strings.HasPrefix(apiVersion, v1alpha1.GroupVersion.Group+"/") {
					out = append(out, documented{where: fmt.Sprintf("%s:%d", rel, line), object: obj})
				}
			}
		}
	}
	return out
}

// yamlBlocks returns the ```yaml code blocks of a Markdown file by the line
// they start on, without the indentation of their fence.
func yamlBlocks(md []byte) map[int]string {
	blocks := map[int]string{}
	var (
		in     bool
		start  int
		indent string
		body   strings.Builder
	)
	s := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case !in && (trimmed == "```yaml" || trimmed == "```yml"):
			in, start, indent = true, n, line[:len(line)-len(trimmed)]
			body.Reset()
		case in && trimmed == "```":
			in = false
			blocks[start] = body.String()
		case in:
			body.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
	}
	Expect(s.Err()).NotTo(HaveOccurred())
	return blocks
}

func kubectlDryRun(obj map[string]any) (string, error) {
	raw, err := yaml.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	f := filepath.Join(GinkgoT().TempDir(), "policy.yaml")
	Expect(os.WriteFile(f, raw, 0o600)).To(Succeed())
	out, err := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", env.Kubeconfig,
		"apply", "--dry-run=server", "-f", f).CombinedOutput()
	return string(out), err
}

var _ = Describe("the policies shown in the README and in docs/", func() {
	It("pass kubectl apply --dry-run=server with the webhook serving", func() {
		policies := documentedPolicies()
		// The README's policy and the sync-wave example of docs/policies/gitops.md at least.
		Expect(len(policies)).To(BeNumerically(">=", 2))
		for _, p := range policies {
			GinkgoWriter.Printf("documented policy at %s\n", p.where)
		}
		for _, p := range policies {
			out, err := kubectlDryRun(p.object)
			Expect(err).NotTo(HaveOccurred(), "%s: %s", p.where, out)
			Expect(out).To(ContainSubstring("(server dry run)"), p.where)
		}

		By("refusing a broken copy, so the webhook is known to be in the path")
		broken := policies[0].object
		Expect(broken).To(HaveKey("spec"))
		broken["spec"].(map[string]any)["clusterSelector"] = "cluster.metadata.lables['env'] == 'prod'"
		out, err := kubectlDryRun(broken)
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("spec.clusterSelector"))
		Expect(out).To(ContainSubstring("undefined field 'lables'"))
		GinkgoWriter.Printf("kubectl says: %s\n", out)
	})
})
