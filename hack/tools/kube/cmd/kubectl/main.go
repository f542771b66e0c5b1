// Command kubectl is the upstream client, built from Go modules; the tests use
// it to check that samples pass `kubectl apply --dry-run=server`.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand())
}
