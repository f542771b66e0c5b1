package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fleetops-dev/cleanup-operator/internal/review"
)

// printDiff prints the policies that change, then each cluster whose
// decisions change: its scalar fields as today -> after, its lists as the
// lines removed (-) and added (+).
func printDiff(w io.Writer, r *review.Report) {
	for _, p := range r.Policies {
		fmt.Fprintf(w, "CleanupPolicy %s: %s\n", p.Name, p.Change)
	}
	for _, h := range r.Holds {
		fmt.Fprintf(w, "CleanupPolicy %s: its blast radius holds %s today, %s after\n", h.Policy, heldList(h.Today), heldList(h.After))
	}
	for _, c := range r.Clusters {
		fmt.Fprintf(w, "\nManagedCluster %s\n", c.Cluster)
		t, a := c.Today, c.After
		scalar(w, "policy", orNone(t.Policy), orNone(a.Policy))
		scalar(w, "held", orNone(t.Held), orNone(a.Held))
		scalar(w, "suspended", orNone(t.Suspended), orNone(a.Suspended))
		scalar(w, "strategy", orNone(t.Strategy), orNone(a.Strategy))
		if t.BlastRadius != a.BlastRadius {
			fmt.Fprintf(w, "  blast radius:\n    today: %s\n    after: %s\n", mayBegin(t), mayBegin(a))
		}
		scalar(w, "protected", fmt.Sprint(t.Protected), fmt.Sprint(a.Protected))
		scalar(w, "protection error", orNone(t.ProtectionError), orNone(a.ProtectionError))
		lines(w, "a deletion would delete", t.Delete, a.Delete)
		lines(w, "orphan", t.Orphan, a.Orphan)
		lines(w, "keep", t.Keep, a.Keep)
		lines(w, "hold", t.Hold, a.Hold)
		lines(w, "prune", t.Prune, a.Prune)
	}
	fmt.Fprintf(w, "\n%d cluster(s) change, %d unchanged.\n", len(r.Clusters), r.Unchanged)
}

// heldList names the teardowns held, or none.
func heldList(held []string) string {
	if len(held) == 0 {
		return "no teardown"
	}
	return fmt.Sprintf("%d teardown(s): %s", len(held), strings.Join(held, ", "))
}

// mayBegin is what the blast radius says of a cluster's teardown.
func mayBegin(s review.Side) string {
	if s.BlastRadius == "" {
		return "not held by the blast radius"
	}
	return s.BlastRadius
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func scalar(w io.Writer, name, today, after string) {
	if today != after {
		fmt.Fprintf(w, "  %s: %s -> %s\n", name, today, after)
	}
}

// lines prints what a list loses and gains; the same lines in another
// order print as such.
func lines(w io.Writer, name string, today, after []string) {
	if slices.Equal(today, after) {
		return
	}
	fmt.Fprintf(w, "  %s:\n", name)
	changed := false
	for _, s := range today {
		if !slices.Contains(after, s) {
			fmt.Fprintf(w, "    - %s\n", s)
			changed = true
		}
	}
	for _, s := range after {
		if !slices.Contains(today, s) {
			fmt.Fprintf(w, "    + %s\n", s)
			changed = true
		}
	}
	if !changed {
		fmt.Fprintln(w, "    (the same objects, in another order:)")
		for _, s := range after {
			fmt.Fprintf(w, "    %s\n", s)
		}
	}
}
