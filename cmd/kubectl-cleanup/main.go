// Command kubectl-cleanup is a kubectl plugin that shows what the operator
// would do with a cluster before it is deleted (`kubectl cleanup plan`), and
// where the cleanups in progress stand (`kubectl cleanup status`). It takes
// its decisions with the operator's own code, and only reads, except
// `kubectl cleanup uninstall`, which removes what the operator wrote on a hub
// once the operator is gone.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	cmd, o := newRoot(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	err := cmd.Execute()
	os.Exit(exitCode(err, o.ran))
}
