package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/controller"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// printPlan writes a plan as numbered steps, in the order the operator
// takes them.
func printPlan(w io.Writer, p *decision.ClusterPlan) {
	if p.Deleting {
		fmt.Fprintf(w, "ManagedCluster %s is being deleted; the steps below are what remains.\n", p.Cluster)
	}
	if p.Held != "" {
		fmt.Fprintf(w, "ManagedCluster %s: %s\n", p.Cluster, p.Held)
		return
	}
	fmt.Fprintf(w, "ManagedCluster %s is governed by CleanupPolicy %s (generation %d).\n", p.Cluster, p.Policy, p.PolicyGeneration)
	availability := "available"
	if !p.Available {
		availability = "not available"
	}
	fmt.Fprintf(w, "Strategy: %s, timeout %s; the cluster is %s.\n", p.Strategy, p.Timeout, availability)
	switch {
	case p.Strategy == v1alpha1.RemoveStrategyBestEffort && !p.Available:
		fmt.Fprintln(w, "  BestEffort on an unavailable cluster: the work agent's finalizer is removed at once from what it holds,")
		fmt.Fprintln(w, "  except from works with an orphaning deleteOption, which wait for the timeout first.")
	case p.Strategy == v1alpha1.RemoveStrategyRequired:
		fmt.Fprintln(w, "  Required: the cleanup waits for every object, past the timeout too.")
	}
	if p.DryRun {
		fmt.Fprintln(w, "Dry run: the operator would only report these steps; nothing would be deleted.")
	}

	fmt.Fprintln(w, "\nIf the cluster is deleted now:")
	n := 0
	step := func(format string, args ...any) {
		n++
		fmt.Fprintf(w, "%2d. %s\n", n, fmt.Sprintf(format, args...))
	}
	if p.OrphanAll {
		step("orphan: give every ManifestWork deleteOption Orphan, so that its resources stay on the managed cluster, and wait until the work agent applied it")
	} else if orphaning(p.Works) {
		step("orphan: give each ManifestWork the deleteOption below, and wait until the work agent applied it")
	}
	if p.Namespace != nil {
		step("label namespace %s %s=true", p.Namespace.Name, v1alpha1.ClusterDeletingLabel)
	}
	if p.Signal != nil {
		if p.Signal.Present {
			step("signal: delete ManifestWork %s and wait until the work agent has removed it", p.Signal.Work)
		} else {
			step("signal: ManifestWork %s does not exist, nothing to signal", p.Signal.Work)
		}
	}
	if len(p.Gate.Resources) > 0 {
		holding := "none exists now"
		if len(p.Gate.Holding) > 0 {
			holding = fmt.Sprintf("%d exist now: %s", len(p.Gate.Holding), strings.Join(p.Gate.Holding, ", "))
		}
		step("gate: wait until no %s remain (%s)", strings.Join(p.Gate.Resources, ", "), holding)
	}
	for i, s := range p.Stages {
		if len(s.Groups) == 0 {
			step("stage %s (%d of %d, %s): nothing to delete", s.Name, i+1, len(p.Stages), s.Resource)
			continue
		}
		step("stage %s (%d of %d, %s): delete, one group after the other:", s.Name, i+1, len(p.Stages), s.Resource)
		for _, g := range s.Groups {
			fmt.Fprintf(w, "      cleanup-priority %s: %s\n", g.Priority, strings.Join(g.Objects, ", "))
		}
	}
	switch {
	case p.Namespace == nil:
		step("namespace: there is no cluster namespace")
	case p.Namespace.Keep:
		step("namespace %s: keep (keepNamespace is true)", p.Namespace.Name)
	default:
		step("namespace %s: delete", p.Namespace.Name)
	}
	step("remove the finalizer %s: the cluster goes", v1alpha1.ClusterCleanupFinalizer)

	if len(p.Works) > 0 {
		fmt.Fprintln(w, "\nWhen a ManifestWork is deleted, what stays on the managed cluster:")
		if p.OrphanAll {
			fmt.Fprintln(w, "  (under Needless every work is orphaned before the cleanup, whatever the orphaning rules say)")
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, wp := range p.Works {
			fmt.Fprintf(tw, "  %s\t%s\n", wp.Name, describeWork(wp))
		}
		_ = tw.Flush()
	}
	if len(p.Prune) > 0 {
		fmt.Fprintln(w, "\nPrune behaviour (what a deleted ConfigurationPolicy removes from the managed cluster):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, pp := range p.Prune {
			fmt.Fprintf(tw, "  %s\t%s\n", pp.Object, describePrune(pp))
		}
		_ = tw.Flush()
		for _, pp := range p.Prune {
			if pp.HubTemplate != "" {
				fmt.Fprintf(w, "  %s does not read its decision; put this line in its spec:\n    %s\n", pp.Object, pp.HubTemplate)
			}
		}
	}
}

func describeWork(wp decision.WorkPlan) string {
	switch {
	case wp.Error != "":
		return "undecided (the work is not stamped): " + wp.Error
	case wp.PropagationPolicy == "":
		return "nothing: its resources are deleted with it"
	case wp.PropagationPolicy == "Orphan":
		return "everything: Orphan"
	}
	var kept []string
	for _, o := range wp.Orphaned {
		name := o.Name
		if o.Namespace != "" {
			name = o.Namespace + "/" + o.Name
		}
		kept = append(kept, fmt.Sprintf("%s %s (rule %s)", o.Resource, name, o.Rule))
	}
	return "SelectivelyOrphan: " + strings.Join(kept, ", ")
}

func describePrune(pp decision.PrunePlan) string {
	switch {
	case pp.Error != "":
		return "undecided: " + pp.Error
	case pp.Ineffective:
		return string(pp.Behavior) + " (no effect while remediationAction is inform)"
	}
	return string(pp.Behavior)
}

// printStatus writes one line per cluster in cleanup.
func printStatus(w io.Writer, status []controller.ClusterStatus) {
	if len(status) == 0 {
		fmt.Fprintln(w, "No cluster is being cleaned up.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPOLICY\tSTEP\tAGE\tREMAINING\tMESSAGE")
	now := time.Now()
	for _, s := range status {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Cluster, s.Policy, s.Step,
			duration.HumanDuration(now.Sub(s.Since.Time)), describeRemaining(s.Remaining), s.Message)
	}
	_ = tw.Flush()
}

func describeRemaining(r controller.Remaining) string {
	var parts []string
	if r.Monitored > 0 {
		parts = append(parts, fmt.Sprintf("monitored %d", r.Monitored))
	}
	stages := make([]string, 0, len(r.Stages))
	for s := range r.Stages {
		stages = append(stages, s)
	}
	slices.Sort(stages)
	for _, s := range stages {
		parts = append(parts, fmt.Sprintf("%s %d", s, r.Stages[s]))
	}
	if r.Namespace {
		parts = append(parts, "namespace")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// orphaning says whether a work's decided deleteOption keeps anything.
func orphaning(works []decision.WorkPlan) bool {
	for _, w := range works {
		if w.PropagationPolicy != "" {
			return true
		}
	}
	return false
}
