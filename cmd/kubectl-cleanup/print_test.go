package main

import (
	"strings"
	"testing"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// TestPrintCollection: a group the plan deletes in one deletecollection is
// said to be; a group deleted one by one is not.
func TestPrintCollection(t *testing.T) {
	del := func(name string, group int, collection bool) decision.Action {
		return decision.Action{Verb: decision.VerbDelete, Resource: "manifestworks.work.open-cluster-management.io", Namespace: "c1",
			Name: name, Group: group, Priority: map[int]string{0: "10", 1: "20"}[group], Collection: collection}
	}
	printed := func(acts ...decision.Action) string {
		st := decision.Step{Kind: decision.StepStage, Name: "manifestworks", Resource: "manifestworks.work.open-cluster-management.io",
			State: decision.StateNext, Actions: acts}
		var b strings.Builder
		printStage(&b, "c1", st, 2, 2, func(decision.Step, string, ...any) {})
		return b.String()
	}
	// Every work that remains, one group: one request.
	if got, want := printed(del("a", 0, true), del("b", 0, true)), "      cleanup-priority 10 (in one deletecollection, the rest of the resource left out by name): a, b\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// A cleanup-priority split: one by one.
	if got, want := printed(del("a", 0, false), del("b", 1, false)), "      cleanup-priority 10: a\n      cleanup-priority 20: b\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestPrintOutside: an object outside the cluster namespace is named with
// its namespace, and a work stuck deleting with what its agent says.
func TestPrintOutside(t *testing.T) {
	st := decision.Step{Kind: decision.StepStage, Name: "argocd-clusters", Resource: "secrets", State: decision.StateNext,
		Actions: []decision.Action{
			{Verb: decision.VerbDelete, Resource: "secrets", Namespace: "argocd", Name: "cluster-c1", Priority: "unset"},
			{Verb: decision.VerbWait, Resource: "secrets", Namespace: "c1", Name: "local", Priority: "unset",
				Agent: "Deleting=True since 2026-01-01T00:00:00Z (WorkDeleting: ManifestWork is being deleted)"},
		}}
	var b strings.Builder
	printStage(&b, "c1", st, 1, 1, func(decision.Step, string, ...any) {})
	want := "      cleanup-priority unset: argocd/cluster-c1, local (deleting; the work agent reports " +
		"Deleting=True since 2026-01-01T00:00:00Z (WorkDeleting: ManifestWork is being deleted))\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
