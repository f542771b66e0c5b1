package e2e

import (
	"path/filepath"

	. "github.com/onsi/gomega"
)

// startPropagator runs the governance-policy-propagator, bin/e2e-propagator
// (./cmd/propagator, built by the make target with the module file of the
// propagator's version), as the cluster administrator. Placement decisions
// are written by the tests: no placement controller runs.
func startPropagator() *process {
	p, err := startProcess("propagator", filepath.Join(paths.bin, "e2e-propagator"), nil,
		"--kubeconfig="+adminKubeconfig)
	Expect(err).NotTo(HaveOccurred())
	return p
}
