package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
)

// options are the flags every subcommand shares.
type options struct {
	kube    *genericclioptions.ConfigFlags
	output  string
	streams genericiooptions.IOStreams
	// ran says the command line was parsed and a command started.
	ran bool
	// versionChecked says the operator's version was compared once.
	versionChecked bool
	// settingsNamespace is --operator-namespace of the commands that
	// decide as the operator does.
	settingsNamespace string
}

// Annotations of the commands -n does not apply to: the value says why.
const noNamespaceAnnotation = "cleanup.fleetops.dev/no-namespace"

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	root, _ := newRoot(streams)
	return root
}

// newRoot builds the command tree; the options say, once it ran, whether
// a command started (exitCode).
func newRoot(streams genericiooptions.IOStreams) (*cobra.Command, *options) {
	o := &options{kube: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "cleanup",
		Short: "Preview and follow the cleanups of deleted ManagedClusters",
		Long: `kubectl cleanup shows what the cleanup operator would do with a ManagedCluster
if it were deleted now, and where the cleanups in progress stand. It reads
the CleanupPolicies, clusters and cluster namespaces through your kubeconfig
and takes the operator's decisions with the operator's own code. plan and
status change nothing; confirm-delete confirms the deletion of a cluster
protected from deletion; uninstall removes what the operator put on the hub,
once the operator is gone. history prints the teardown records the operator
keeps, which outlive the clusters. version prints the plugin's and the
operator's versions; the other commands warn when they differ, as the
plugin's decisions are then those of another version.

The kubectl flags (--kubeconfig, --context, --as, ...) choose the API server
and the user. -n names the operator's namespace where one applies (history,
version); ManagedClusters are cluster-scoped, and plan, status,
confirm-delete and uninstall say so when given -n.

` + exitCodesHelp(),
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl cleanup"},
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			o.ran = true
			if why, ok := cmd.Annotations[noNamespaceAnnotation]; ok && o.namespace() != "" {
				fmt.Fprintf(o.streams.ErrOut, "Warning: -n/--namespace does not apply to %s: %s.\n", cmd.Name(), why)
			}
			return nil
		},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	o.kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().Lookup("namespace").Usage = "The operator's namespace, for history and version; the other commands take none."
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: empty for text, json or yaml.")
	o.registerCompletions(root)

	root.AddCommand(newPlanCommand(o), newStatusCommand(o), newHistoryCommand(o))
	root.AddCommand(newUninstallCommand(o))
	root.AddCommand(newConfirmDeleteCommand(o), newReleaseCommand(o))
	root.AddCommand(newVersionCommand(o))
	root.AddCommand(newDiffCommand(o), newSnapshotCommand(o))
	return root, o
}

// noNamespace marks a command -n does not apply to, and says so in its help.
func noNamespace(cmd *cobra.Command, why string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[noNamespaceAnnotation] = why
	cmd.Long = strings.TrimSpace(cmd.Long + "\n\n-n/--namespace does not apply: " + why + ".")
	return cmd
}

// namespace is the namespace -n names, empty when not given: the
// kubeconfig's namespace does not name the operator's.
func (o *options) namespace() string {
	if o.kube.Namespace == nil {
		return ""
	}
	return *o.kube.Namespace
}

// operatorNamespace is the operator's namespace: -n, else the command's
// --operator-namespace, else POD_NAMESPACE, else the default install's.
func (o *options) operatorNamespace(flag string) (string, error) {
	ns := o.namespace()
	switch {
	case ns != "" && flag != "" && ns != flag:
		return "", usagef("-n %s and --operator-namespace %s name two namespaces: give one", ns, flag)
	case ns != "":
		return ns, nil
	}
	return record.Namespace(flag), nil
}

func newPlanCommand(o *options) *cobra.Command {
	return o.operatorNamespaceFlag(noNamespace(&cobra.Command{
		Use:   "plan CLUSTER",
		Short: "Print what deleting the cluster would do, step by step",
		Long: `plan prints the CleanupPolicy that governs the cluster, the remove strategy,
the deletion signal and the monitored resources the cleanup waits for, each
stage with the objects it would delete in order, the namespace decision, and
the orphaned manifests and prune behaviours, as the operator would decide
them now. It decides with the operator's settings (its blast radius, the
namespaces it never deletes, how long a deletion confirmation counts), as
the operator publishes them in its namespace, and counts its teardown
records; what it cannot read it says, and takes the operator's defaults.`,
		Example: `  kubectl cleanup plan prod-eu
  kubectl cleanup plan prod-eu -o yaml`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := o.preview(cmd.Context())
			if err != nil {
				return err
			}
			plan, err := p.plan(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.print(plan, func(w io.Writer) { printPlan(w, plan) })
		},
	}, clusterScoped))
}

// clusterScoped says why -n does not apply to the commands on clusters.
const clusterScoped = "ManagedClusters are cluster-scoped, and each cluster's objects live in the namespace of its name"

func newStatusCommand(o *options) *cobra.Command {
	return o.operatorNamespaceFlag(noNamespace(&cobra.Command{
		Use:   "status",
		Short: "List the clusters in cleanup, their step and what remains",
		Long: `status lists the ManagedClusters being deleted that carry the operator's
finalizer, with the step their cleanup is at and what remains, and the
clusters protected from deletion. When some are in cleanup and no operator
runs (no Deployment of it with replicas, no operator process with a live
heartbeat: see version), it warns on standard error: cleanups move only while
an operator runs.`,
		Example: `  kubectl cleanup status
  kubectl cleanup status -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.preview(cmd.Context())
			if err != nil {
				return err
			}
			status, err := p.status(cmd.Context())
			if err != nil {
				return err
			}
			protected, err := p.protected(cmd.Context())
			if err != nil {
				return err
			}
			if len(status) > 0 {
				o.warnNotRunning(cmd.Context(), p.client)
			}
			return o.print(status, func(w io.Writer) { printStatus(w, status); printProtected(w, protected) })
		},
	}, clusterScoped))
}

// client connects to the API server the kubeconfig names, once --output
// is known to be one the plugin prints.
func (o *options) client() (client.Client, error) {
	if err := o.checkOutput(); err != nil {
		return nil, err
	}
	return o.connect(scheme.New())
}

// checkOutput says whether --output is a format the plugin prints.
func (o *options) checkOutput() error {
	switch o.output {
	case "", "json", "yaml":
		return nil
	}
	return usagef("--output: %q is not one of json, yaml (or empty for text)", o.output)
}

// connect connects to the API server the kubeconfig names, with the
// types of s, and warns once if the operator runs another version.
func (o *options) connect(s *runtime.Scheme) (client.Client, error) {
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	o.warnVersion(c)
	return c, nil
}

// preview connects to the API server the kubeconfig names.
func (o *options) preview(ctx context.Context) (*preview, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	st, records := o.operatorSettings(ctx, c)
	return newPreview(ctx, c, c.RESTMapper(), st, records)
}

// print writes v as JSON or YAML, or as text with the given printer.
func (o *options) print(v any, text func(io.Writer)) error {
	out := o.streams.Out
	switch o.output {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		raw, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(raw)
		return err
	}
	text(out)
	return nil
}
