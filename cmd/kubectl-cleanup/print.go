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
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// printPlan writes a plan as numbered steps, in the order the operator
// takes them, each with what it does to each object.
func printPlan(w io.Writer, p *decision.Plan) {
	if p.Deleting {
		fmt.Fprintf(w, "ManagedCluster %s is being deleted; steps marked (done) are behind it.\n", p.Cluster)
	}
	defer printProtection(w, p)
	switch {
	case p.Held != "":
		fmt.Fprintf(w, "ManagedCluster %s: held, nothing would be deleted: %s\n", p.Cluster, p.Held)
		return
	case p.Policy == "":
		fmt.Fprintf(w, "ManagedCluster %s: no CleanupPolicy governs the cluster: the operator would leave its content as it is, to OCM's own cleanup where it runs\n", p.Cluster)
		return
	}
	printHeader(w, p)
	if p.Suspended != "" {
		fmt.Fprintf(w, "Suspended: %s; the operator writes nothing for the cluster until it is resumed.\n", p.Suspended)
	}
	if h := p.OutOfOrderHold(); h != "" {
		fmt.Fprintf(w, "Out of order: %s.\n", h)
	}
	if p.Deleting {
		fmt.Fprintln(w, "\nThe teardown:")
	} else {
		fmt.Fprintln(w, "\nIf the cluster is deleted now:")
	}
	printSteps(w, p)
	printWorks(w, p)
	printPrune(w, p)
}

// printSteps numbers the plan's steps from 1, as a reader counts them,
// and marks each one the teardown has done. A cluster not being deleted
// has no teardown: a step it would find nothing to do for is not done.
func printSteps(w io.Writer, p *decision.Plan) {
	n := 0
	step := func(st decision.Step, format string, args ...any) {
		n++
		mark := ""
		if p.Deleting && st.State == decision.StateDone {
			mark = " (done)"
		}
		fmt.Fprintf(w, "%2d. %s%s\n", n, fmt.Sprintf(format, args...), mark)
	}
	stages, stage := countStages(p), 0
	for _, st := range p.Steps {
		switch st.Kind {
		case decision.StepHooks:
			if len(st.Actions) > 0 {
				step(st, "hold: wait until every pre-cleanup hook is removed (nothing is written before, nothing is ever forced):")
				for _, h := range p.Hooks {
					fmt.Fprintf(w, "      hook: %s\n", h)
				}
			}
		case decision.StepBlastRadius:
			for _, a := range st.Actions {
				step(st, "hold: %s", a.For)
			}
		case decision.StepOrphaning:
			printOrphaning(w, p, st, step)
		case decision.StepSignal:
			printSignal(w, p, st, step)
		case decision.StepGate:
			printGate(st, step)
		case decision.StepStage:
			stage++
			printStage(w, p.Cluster, st, stage, stages, step)
		case decision.StepNamespace:
			printNamespace(st, step)
		case decision.StepFinish:
			outcome := ""
			if st.Report != nil && st.Report.Reason != "" {
				outcome = ", reason " + st.Report.Reason
			}
			step(st, "remove the finalizer %s: the cluster goes%s", v1alpha1.ClusterCleanupFinalizer, outcome)
		}
	}
}

func printHeader(w io.Writer, p *decision.Plan) {
	fmt.Fprintf(w, "ManagedCluster %s is governed by CleanupPolicy %s (generation %d).\n", p.Cluster, p.Policy, p.PolicyGeneration)
	if p.Governs != "" {
		fmt.Fprintf(w, "Why: %s.\n", p.Governs)
	}
	availability := "available"
	if !p.Available {
		availability = "not available"
	}
	fmt.Fprintf(w, "Strategy: %s, timeout %s; the cluster is %s.\n", p.Strategy, p.Timeout, availability)
	if p.Reachable != "" {
		fmt.Fprintf(w, "  Available: %s.\n", p.Reachable)
	}
	if p.Strategy == v1alpha1.RemoveStrategyRequired {
		fmt.Fprintln(w, "  Required: the cleanup waits for every object, past the timeout too.")
	}
	if p.DryRun {
		fmt.Fprintln(w, "Dry run: the operator would only report these steps; nothing would be deleted.")
		fmt.Fprintln(w, "  OCM's own cleanup, where it runs, deletes the cluster's add-ons and works as it would without the operator.")
	} else {
		fmt.Fprintf(w, "  OCM's own cleanup, where it runs, waits for these steps: the operator marks namespace %s %s=true.\n", p.Cluster, v1alpha1.GovernedNamespaceLabel)
	}
}

type stepPrinter func(st decision.Step, format string, args ...any)

func printOrphaning(w io.Writer, p *decision.Plan, st decision.Step, step stepPrinter) {
	switch {
	case p.Strategy == v1alpha1.RemoveStrategyNeedless:
		step(st, "orphan: give every ManifestWork deleteOption Orphan, so that its resources stay on the managed cluster, and wait until the work agent applied it")
	case len(st.Actions) > 0 || slices.ContainsFunc(p.Works, func(wp decision.WorkPlan) bool { return wp.PropagationPolicy != "" }):
		step(st, "orphan: give each ManifestWork the deleteOption below, and wait until the work agent applied it")
	default:
		return
	}
	for _, a := range st.Actions {
		switch a.Verb {
		case decision.VerbHold:
			fmt.Fprintf(w, "      hold: %s\n", a.For)
		case decision.VerbWait:
			fmt.Fprintf(w, "      wait: %s for %s\n", a.Name, a.For)
		case decision.VerbRecordUnconfirmed:
			fmt.Fprintf(w, "      record as not confirmed: %s (%s)\n", strings.Join(a.Objects, ", "), a.For)
		}
	}
}

func printSignal(w io.Writer, p *decision.Plan, st decision.Step, step stepPrinter) {
	work := false
	for _, a := range st.Actions {
		switch a.Verb {
		case decision.VerbLabel:
			step(st, "label namespace %s %s=true", a.Name, v1alpha1.ClusterDeletingLabel)
			continue
		case decision.VerbDelete:
			step(st, "signal: delete ManifestWork %s and wait until the work agent has removed it", a.Name)
		case decision.VerbWait:
			step(st, "signal: wait until the work agent has removed ManifestWork %s", a.Name)
		case decision.VerbForce:
			step(st, "signal: remove the work agent's finalizer from ManifestWork %s (%s)", a.Name, a.For)
		case decision.VerbHold:
			step(st, "signal: hold: %s", a.For)
		}
		work = true
	}
	if !work && st.Name != "" {
		step(st, "signal: ManifestWork %s does not exist, nothing to signal", st.Name)
	}
}

func printGate(st decision.Step, step stepPrinter) {
	var holding []string
	for _, a := range st.Actions {
		if a.Verb == decision.VerbHold {
			step(st, "gate: hold: %s", a.For)
			return
		}
		holding = append(holding, actionKey(a))
	}
	if st.Resource == "" {
		return
	}
	exist := "none exists now"
	if len(holding) > 0 {
		exist = fmt.Sprintf("%d exist now: %s", len(holding), strings.Join(holding, ", "))
	}
	step(st, "gate: wait until no %s remain (%s)", st.Resource, exist)
}

func printStage(w io.Writer, cluster string, st decision.Step, i, n int, step stepPrinter) {
	where := fmt.Sprintf("stage %s (%d of %d, %s)", st.Name, i, n, st.Resource)
	switch {
	case len(st.Actions) == 0:
		step(st, "%s: nothing to delete", where)
		return
	case st.Actions[0].Verb == decision.VerbHold:
		step(st, "%s: hold: %s", where, st.Actions[0].For)
		return
	}
	step(st, "%s: delete, one group after the other:", where)
	for g := 0; g <= st.Actions[len(st.Actions)-1].Group; g++ {
		var names []string
		priority, collection := "", false
		for _, a := range st.Actions {
			if a.Group != g {
				continue
			}
			priority, collection = a.Priority, collection || a.Collection
			name := a.Name
			if a.Namespace != "" && a.Namespace != cluster {
				name = a.Namespace + "/" + a.Name // outside the cluster namespace
			}
			switch a.Verb {
			case decision.VerbWait:
				agent := ""
				if a.Agent != "" {
					agent = "; the work agent reports " + a.Agent
				}
				names = append(names, name+" (deleting"+agent+")")
			case decision.VerbForce:
				// After its delete, or once it is deleting.
				if i := slices.Index(names, name); i >= 0 {
					names[i] += " (then remove the work agent's finalizer: " + a.For + ")"
				} else {
					names = append(names, name+" (deleting; remove the work agent's finalizer: "+a.For+")")
				}
			default:
				names = append(names, name)
			}
		}
		how := ""
		if collection {
			how = " (in one deletecollection, the rest of the resource left out by name)"
		}
		fmt.Fprintf(w, "      cleanup-priority %s%s: %s\n", priority, how, strings.Join(names, ", "))
	}
}

func printNamespace(st decision.Step, step stepPrinter) {
	switch {
	case st.Name == "":
		step(st, "namespace: there is no cluster namespace")
	case len(st.Actions) == 0:
		step(st, "namespace %s: being deleted", st.Name)
	case st.Actions[0].Verb == decision.VerbDelete:
		step(st, "namespace %s: delete", st.Name)
	case st.Actions[0].Verb == decision.VerbHold:
		step(st, "namespace %s: hold: %s", st.Name, st.Actions[0].For)
	case st.Actions[0].Verb == decision.VerbUnlabel:
		why := strings.TrimSuffix(st.Actions[0].For, "; "+v1alpha1.ClusterDeletingLabel)
		step(st, "namespace %s: keep (%s), and take the label %s off", st.Name, why, v1alpha1.ClusterDeletingLabel)
	default:
		step(st, "namespace %s: keep (%s)", st.Name, st.Actions[0].For)
	}
}

func countStages(p *decision.Plan) int {
	n := 0
	for _, st := range p.Steps {
		if st.Kind == decision.StepStage {
			n++
		}
	}
	return n
}

// actionKey names an action's object as messages do: resource/name.
func actionKey(a decision.Action) string {
	resource, _, _ := strings.Cut(a.Resource, ".")
	return resource + "/" + a.Name
}

func printWorks(w io.Writer, p *decision.Plan) {
	if len(p.Works) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWhen a ManifestWork is deleted, what stays on the managed cluster:")
	if p.Strategy == v1alpha1.RemoveStrategyNeedless {
		fmt.Fprintln(w, "  (under Needless every work is orphaned before the cleanup, whatever the orphaning rules say)")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, wp := range p.Works {
		fmt.Fprintf(tw, "  %s\t%s\n", wp.Name, describeWork(wp))
	}
	_ = tw.Flush()
}

func printPrune(w io.Writer, p *decision.Plan) {
	if len(p.Prune) == 0 {
		return
	}
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

func describeWork(wp decision.WorkPlan) string {
	switch {
	case wp.Unreachable != "":
		return "the policy's decision is not written (held): " + wp.Unreachable
	case wp.Error != "":
		return "undecided (the work is not stamped, and not deleted): " + wp.Error
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
func printStatus(w io.Writer, status []clusterStatus) {
	if len(status) == 0 {
		fmt.Fprintln(w, "No cluster is being cleaned up.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPOLICY\tSTEP\tAGE\tREMAINING\tMESSAGE")
	now := time.Now()
	for _, s := range status {
		remaining := describeRemaining(s.Remaining)
		if len(s.Hooks) > 0 {
			remaining = fmt.Sprintf("hooks %d, %s", len(s.Hooks), remaining)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Cluster, s.Policy, s.Step,
			duration.HumanDuration(now.Sub(s.Since.Time)), remaining, s.Message)
	}
	_ = tw.Flush()
}

func describeRemaining(r remaining) string {
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

// printProtection says whether the cluster is protected from deletion, and
// where its deletion confirmation stands.
func printProtection(w io.Writer, p *decision.Plan) {
	pr := p.Protection
	if pr == nil {
		return
	}
	switch {
	case pr.Error != "":
		fmt.Fprintf(w, "\nProtected from deletion: spec.deletionProtection failed for the cluster (%s), which protects it.\n", pr.Error)
	case pr.Held && pr.Protected:
		fmt.Fprintln(w, "\nProtected from deletion: the cluster is held and keeps its mark.")
	case pr.Protected:
		fmt.Fprintln(w, "\nProtected from deletion (spec.deletionProtection is true).")
	default:
		return
	}
	fmt.Fprintf(w, "  kubectl delete is refused until the deletion is confirmed: kubectl cleanup confirm-delete %s\n", p.Cluster)
	switch {
	case pr.Accepted != "":
		fmt.Fprintf(w, "  Deletion confirmed at %s: it counts until %s (with the operator's default validity).\n",
			pr.Accepted, pr.Expires.UTC().Format(time.RFC3339))
	case pr.Refused != "":
		fmt.Fprintf(w, "  The cluster's deletion confirmation does not count: %s.\n", pr.Refused)
	}
}
