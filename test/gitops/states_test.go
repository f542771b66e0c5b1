package gitops

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// StatesDirEnv names the directory where each policy the suite assesses is
// kept, as the operator wrote it, with what kstatus and the health check
// said of it: the test module of test/gitops/argocd reads them through
// Argo CD's own code (make test sets it for both).
const StatesDirEnv = "GITOPS_STATES_DIR"

// keptState is one policy as read from the API server and the readings of
// it this suite asserted on.
type keptState struct {
	Object  map[string]any `json:"object"`
	Kstatus status.Status  `json:"kstatus"`
	Argo    health         `json:"argo"`
}

// keep writes a's policy and readings to the states directory, once per
// distinct state, when the directory is set.
func keep(g Gomega, a assessment) {
	dir := os.Getenv(StatesDirEnv)
	if dir == "" {
		return
	}
	raw, err := json.Marshal(keptState{Object: a.object.Object, Kstatus: a.kstatus.Status, Argo: a.argo})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	name := fmt.Sprintf("%s-%x", a.object.GetName(), sha256.Sum256(raw))[:len(a.object.GetName())+17]
	g.Expect(os.WriteFile(filepath.Join(dir, name+".json"), raw, 0o644)).To(Succeed())
}
