package e2e

import (
	"debug/buildinfo"
	"path/filepath"

	. "github.com/onsi/gomega"
)

const propagatorModule = "open-cluster-management.io/governance-policy-propagator"

// startPropagator runs the governance-policy-propagator, bin/e2e-propagator
// (./cmd/propagator, built by the make target with the module file of the
// propagator's version), as the cluster administrator, once it has checked
// that the binary holds the propagator version this module file resolves.
// Placement decisions are written by the tests: no placement controller runs.
func startPropagator() *process {
	bin := filepath.Join(paths.bin, "e2e-propagator")
	info, err := buildinfo.ReadFile(bin)
	Expect(err).NotTo(HaveOccurred())
	built := ""
	for _, d := range info.Deps {
		if d.Path == propagatorModule {
			built = d.Version
		}
	}
	Expect(built).To(Equal(paths.policyVersion),
		"%s is built with the propagator %q, this module file resolves %s: build it as the make target does", bin, built, paths.policyVersion)
	p, err := startProcess("propagator", bin, nil, "--kubeconfig="+adminKubeconfig)
	Expect(err).NotTo(HaveOccurred())
	return p
}
