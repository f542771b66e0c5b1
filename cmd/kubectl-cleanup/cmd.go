package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/scheme"
)

// options are the flags every subcommand shares.
type options struct {
	kube    *genericclioptions.ConfigFlags
	output  string
	streams genericiooptions.IOStreams
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{kube: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-cleanup",
		Short: "Preview and follow the cleanups of deleted ManagedClusters",
		Long: `kubectl cleanup shows what the cleanup operator would do with a ManagedCluster
if it were deleted now, and where the cleanups in progress stand. It reads
the CleanupPolicies, clusters and cluster namespaces through your kubeconfig
and takes the operator's decisions with the operator's own code. plan and
status change nothing; confirm-delete confirms the deletion of a cluster
protected from deletion; uninstall removes what the operator put on the hub,
once the operator is gone. history prints the teardown records the operator
keeps, which outlive the clusters.`,
		SilenceUsage: true,
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: empty for text, json or yaml.")

	root.AddCommand(newPlanCommand(o), newStatusCommand(o), newHistoryCommand(o))
	root.AddCommand(newUninstallCommand(o))
	root.AddCommand(newConfirmDeleteCommand(o))
	return root
}

func newPlanCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "plan CLUSTER",
		Short: "Print what deleting the cluster would do, step by step",
		Long: `plan prints the CleanupPolicy that governs the cluster, the remove strategy,
the deletion signal and the monitored resources the cleanup waits for, each
stage with the objects it would delete in order, the namespace decision, and
the orphaned manifests and prune behaviours, as the operator would decide
them now.`,
		Example: `  kubectl cleanup plan prod-eu
  kubectl cleanup plan prod-eu -o yaml`,
		Args: cobra.ExactArgs(1),
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
	}
}

func newStatusCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List the clusters in cleanup, their step and what remains",
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
			return o.print(status, func(w io.Writer) { printStatus(w, status); printProtected(w, protected) })
		},
	}
}

// client connects to the API server the kubeconfig names, once --output
// is known to be one the plugin prints.
func (o *options) client() (client.Client, error) {
	switch o.output {
	case "", "json", "yaml":
	default:
		return nil, fmt.Errorf("--output: %q is not one of json, yaml (or empty for text)", o.output)
	}
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// preview connects to the API server the kubeconfig names.
func (o *options) preview(ctx context.Context) (*preview, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	return newPreview(ctx, c, c.RESTMapper())
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
