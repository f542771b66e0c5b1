package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunLocal runs what `make run-local` runs, up to the point where it
// waits for Ctrl-C, then what its instructions suggest: the control plane
// (with kube-controller-manager) starts, the samples and the fleet apply,
// the policies become Ready with the operator running under the permissions
// of config/rbac, and a deleted sample cluster is cleaned up step by step
// until it and its namespace are gone.
func TestRunLocal(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, true); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"export KUBECONFIG=",
		"kubectl cleanup plan prod-eu",
		"Signalling",
		"DeletingStage",
		"DeletingNamespace",
		"Completed",
		"ManagedCluster prod-eu and its namespace are gone.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("%q not printed:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}
