package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunLocal runs what `make run-local` runs, up to the point where it
// waits for Ctrl-C: the control plane starts, the samples and the fleet
// apply, and the policies become Ready.
func TestRunLocal(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, true); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "export KUBECONFIG=") {
		t.Fatalf("no instructions printed:\n%s", out.String())
	}
}
