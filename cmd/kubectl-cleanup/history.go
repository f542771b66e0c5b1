package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
)

func newHistoryCommand(o *options) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "history [CLUSTER|RECORD]",
		Short: "List the teardown records, or print one",
		Long: `history lists the teardown records the operator keeps in its namespace, one
per cluster teardown, the newest first. With a cluster name it prints that
cluster's latest record (with a record name, that record): every object the
teardown acted on, with its step, its action and when, the deletion signal's
outcome and the holds. Records outlive the cluster; dry runs' records say
what would have happened.

-n/--namespace names the operator's namespace (as --operator-namespace
does); without either, POD_NAMESPACE, else ` + record.DefaultNamespace + `.`,
		Example: `  kubectl cleanup history
  kubectl cleanup history prod-eu
  kubectl cleanup history teardown-prod-eu-1a2b3c4d -o json`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeRecords(&namespace),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.operatorNamespace(namespace)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				rs, err := record.List(cmd.Context(), c, ns, "")
				if err != nil {
					return err
				}
				return o.print(summaries(rs), func(w io.Writer) { printHistory(w, ns, rs, time.Now()) })
			}
			r, err := findRecord(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			return o.print(r, func(w io.Writer) { printRecord(w, r, time.Now()) })
		},
	}
	cmd.Flags().StringVar(&namespace, "operator-namespace", "",
		"The operator's namespace, where it keeps the records (as -n); empty: POD_NAMESPACE, else "+record.DefaultNamespace+".")
	return cmd
}

// findRecord reads a record by its name, else the latest record of the
// cluster of that name.
func findRecord(ctx context.Context, c client.Client, ns, name string) (*record.Record, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
	switch {
	case err == nil && record.IsRecord(cm):
		return record.Decode(cm)
	case err != nil && !apierrors.IsNotFound(err):
		return nil, err
	}
	rs, err := record.List(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	// The latest real teardown, else the latest dry run.
	for _, r := range rs {
		if !r.DryRun {
			return &r, nil
		}
	}
	if len(rs) > 0 {
		return &rs[0], nil
	}
	return nil, notFoundf("no teardown record of cluster %s, nor record of that name, in namespace %s", name, ns)
}

// summary is a record without its entries, for the list.
type summary struct {
	Name     string                `json:"name"`
	Cluster  string                `json:"cluster"`
	UID      string                `json:"uid"`
	Policy   string                `json:"policy,omitempty"`
	Strategy string                `json:"strategy,omitempty"`
	DryRun   bool                  `json:"dryRun,omitempty"`
	Start    time.Time             `json:"start"`
	End      *time.Time            `json:"end,omitempty"`
	Outcome  string                `json:"outcome,omitempty"`
	Objects  map[record.Action]int `json:"objects"`
	Holds    int                   `json:"holds,omitempty"`
}

func summaries(rs []record.Record) []summary {
	out := make([]summary, 0, len(rs))
	for _, r := range rs {
		s := summary{Name: r.Name, Cluster: r.Cluster, UID: string(r.UID), Policy: r.Policy, Strategy: r.Strategy, DryRun: r.DryRun,
			Start: r.Start.Time, Outcome: r.Outcome, Objects: r.Counts(), Holds: len(r.Holds)}
		if r.End != nil {
			s.End = &r.End.Time
		}
		out = append(out, s)
	}
	return out
}

// printHistory writes one line per record.
func printHistory(w io.Writer, ns string, rs []record.Record, now time.Time) {
	if len(rs) == 0 {
		fmt.Fprintf(w, "No teardown records in namespace %s.\n", ns)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tRECORD\tPOLICY\tSTRATEGY\tSTARTED\tDURATION\tOUTCOME\tDELETED\tORPHANED\tFORCED\tKEPT\tHOLDS")
	for _, r := range rs {
		counts := r.Counts()
		outcome := r.Outcome
		if outcome == "" {
			outcome = "in progress"
		}
		if r.DryRun {
			outcome = "dry run"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", r.Cluster, r.Name, dash(r.Policy), dash(r.Strategy),
			duration.HumanDuration(now.Sub(r.Start.Time)), lasted(r, now), outcome,
			counts[record.Deleted], counts[record.Orphaned], counts[record.Forced], counts[record.Kept], len(r.Holds))
	}
	_ = tw.Flush()
}

// printRecord writes one record: its header, its counts, and a table of its
// entries in the order they were written.
func printRecord(w io.Writer, r *record.Record, now time.Time) {
	printRecordHeader(w, r, now)
	printRecordObjects(w, r)
	if len(r.Entries) == 0 {
		return
	}
	printRecordEntries(w, r)
}

// printRecordHeader writes what the teardown was: whose, under which
// policy, when, with what signal, and what held it.
func printRecordHeader(w io.Writer, r *record.Record, now time.Time) {
	kind := "Teardown"
	if r.DryRun {
		kind = "Dry run (nothing was done; what the teardown would do)"
	}
	fmt.Fprintf(w, "%s of ManagedCluster %s (uid %s), record %s\n", kind, r.Cluster, r.UID, r.Name)
	policy := dash(r.Policy)
	if r.Policy != "" {
		policy = fmt.Sprintf("%s (generation %d)", r.Policy, r.PolicyGeneration)
	}
	fmt.Fprintf(w, "Policy:    %s, strategy %s\n", policy, dash(r.Strategy))
	for _, d := range r.Decisions {
		fmt.Fprintf(w, "           decided by %s generation %d from %s\n", d.Policy, d.Generation, stamp(d.From.Time))
	}
	fmt.Fprintf(w, "Started:   %s\n", stamp(r.Start.Time))
	if r.End != nil {
		fmt.Fprintf(w, "Ended:     %s (%s), %s: %s\n", stamp(r.End.Time), lasted(*r, now), r.Outcome, r.Message)
	} else {
		fmt.Fprintf(w, "Ended:     in progress (%s so far)\n", lasted(*r, now))
	}
	if r.Resumed {
		fmt.Fprintln(w, "Resumed:   the record began after the teardown had begun; it lacks what was done before")
	}
	if r.Signal != nil {
		work := r.Signal.Work
		if work == "" {
			work = "(no deletion signal)"
		}
		fmt.Fprintf(w, "Signal:    %s: %s\n", work, r.Signal.Outcome)
	}
	for _, h := range r.Holds {
		until := "still holding"
		if h.End != nil {
			until = "until " + stamp(h.End.Time)
		}
		fmt.Fprintf(w, "Hold:      %s, %s (%s): %s\n", stamp(h.Start.Time), until, duration.HumanDuration(h.Duration(now)), h.Reason)
	}
}

// printRecordObjects writes how many objects each action touched, and,
// for a record too large for its ConfigMap, what its listing leaves out.
func printRecordObjects(w io.Writer, r *record.Record) {
	counts := r.Counts()
	var parts []string
	for _, a := range []record.Action{record.Deleted, record.Orphaned, record.Stamped, record.Forced, record.Kept, record.Labelled, record.Unlabelled} {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	fmt.Fprintf(w, "Objects:   %s\n", dash(strings.Join(parts, ", ")))
	if s := r.Summary; s != nil {
		fmt.Fprintf(w, "Summary:   %d entries, the first %d listed; too many for one ConfigMap, the rest counted:\n", s.Entries, s.Kept)
		keys := make([]string, 0, len(s.Omitted))
		for k := range s.Omitted {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "           %s: %d\n", k, s.Omitted[k])
		}
	}
}

// printRecordEntries writes the entries as a table, one object a row, in
// the order they were written.
func printRecordEntries(w io.Writer, r *record.Record) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSTEP\tACTION\tSTATE\tOBJECT\tDETAIL")
	for _, e := range r.Entries {
		resource, _, _ := strings.Cut(e.Resource, ".")
		obj := resource + "/" + e.Name
		var detail []string
		if e.Priority != "" && e.Priority != "unset" {
			detail = append(detail, "cleanup-priority "+e.Priority)
		}
		if e.DeleteOption != "" {
			detail = append(detail, "deleteOption "+e.DeleteOption)
		}
		if len(e.Finalizers) > 0 {
			detail = append(detail, "finalizers removed: "+strings.Join(e.Finalizers, ", "))
		}
		if e.Note != "" {
			detail = append(detail, e.Note)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format("01-02 15:04:05"), e.Step, e.Action, e.State, obj, strings.Join(detail, "; "))
	}
	_ = tw.Flush()
}

func lasted(r record.Record, now time.Time) string {
	end := now
	if r.End != nil {
		end = r.End.Time
	}
	return duration.HumanDuration(end.Sub(r.Start.Time))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
