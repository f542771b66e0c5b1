package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// TestRunLocal runs what `make run-local` runs, up to the point where it
// waits for Ctrl-C, then what its instructions suggest: the control plane
// (with kube-controller-manager) starts, the example policies and the fleet apply,
// the policies become Ready with the operator running under the permissions
// of config/rbac, and a deleted sample cluster is cleaned up step by step
// until it and its namespace are gone. On the way, the operator writes each
// cluster's deletion-signal work once: it creates it, and does not write it
// again until the cluster is deleted. Before that cluster is deleted, the
// subtest "getting started" runs the commands of docs/getting-started.md
// on the same hub (testGettingStarted).
func TestRunLocal(t *testing.T) {
	var out bytes.Buffer
	audit := filepath.Join(t.TempDir(), "audit.log")
	docs := func(ctx context.Context, kubeconfig string) error {
		t.Run("getting started", func(t *testing.T) { testGettingStarted(ctx, t, kubeconfig) })
		return nil
	}
	if err := run(context.Background(), &out, options{check: true, env: testenv.Options{AuditLog: audit}, then: docs}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	checkSignalWorkWrites(t, audit, "prod-sandbox", "prod-eu")
	for _, want := range []string{
		"export KUBECONFIG=",
		"kubectl cleanup plan prod-eu",
		"Signalling",
		"stage/addons",
		"namespace                    deleted",
		"Completed",
		"ManagedCluster prod-eu and its namespace are gone.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("%q not printed:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}

// checkSignalWorkWrites reads the audit log: the operator sent the signal
// work (the sample policy's cleanup-signal) of cluster kept exactly one
// write, a create, and that of cluster deleted at most one, a create, before
// it was deleted (run deletes it as soon as the policies are Ready, which
// may be before its signal work is applied).
func checkSignalWorkWrites(t *testing.T, audit, kept, deleted string) {
	t.Helper()
	events, err := testenv.ReadAuditLog(audit)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string][]string{}
	deleting := false
	for _, ev := range events {
		ref := ev.ObjectRef
		if ev.Verb == "delete" && ref.Resource == "managedclusters" && ref.Name == deleted {
			deleting = true
		}
		if ev.User.Username == testenv.OperatorUser && ref.Resource == "manifestworks" && ref.Name == "cleanup-signal" &&
			(ref.Namespace == kept || ref.Namespace == deleted && !deleting) {
			writes[ref.Namespace] = append(writes[ref.Namespace], fmt.Sprintf("%s %d", ev.Verb, ev.ResponseStatus.Code))
		}
	}
	if got := writes[kept]; len(got) != 1 || got[0] != "create 201" {
		t.Errorf("the operator wrote the signal work of %s %d times (%v); want one create (create 201)", kept, len(got), got)
	}
	if got := writes[deleted]; len(got) > 1 || len(got) == 1 && got[0] != "create 201" {
		t.Errorf("the operator wrote the signal work of %s %d times (%v) before it was deleted; want at most one create (create 201)", deleted, len(got), got)
	}
}
