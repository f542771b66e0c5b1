package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetops-dev/cleanup-operator/internal/review"
)

// diffOptions are the flags of diff and snapshot.
type diffOptions struct {
	files    []string
	snapshot string
	prune    bool
}

func newDiffCommand(o *options) *cobra.Command {
	d := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR",
		Short: "Print what proposed CleanupPolicies would change, per cluster",
		Long: `diff reads the CleanupPolicies of the files (a directory recursively: its .yaml,
.yml and .json files, each one or more documents; other kinds are ignored
with a note), checks them as admission would (the operator's compile, and,
connected, the API server's own validation through a server-side dry run),
and decides every ManagedCluster twice with the operator's code: with the
live policies (today) and with the proposed ones in place of those of the
same name (after). It prints each cluster whose decisions change: the
governing policy, strategy, protection, and what deleting it would delete,
orphan, keep or hold; for a cluster being deleted, whether the blast radius
of its policy holds its teardown (BlastRadiusExceeded, WaitingForTurn), and,
per policy, the teardowns held today and after.

The decisions take the operator's settings as it publishes them in its
namespace (--operator-namespace), and count the teardowns its records say
began; what cannot be read is said on standard error, and the operator's
defaults stand in. A proposed blast-radius window longer than the operator
keeps its records (--teardown-record-max-age) is refused, as admission
refuses it.

Live policies the files do not name stay as they are; with --prune they
count as deleted. With --snapshot the hub is read from a file written by
kubectl cleanup snapshot, and no API server is needed.

Exit status as kubectl diff: 0 nothing changes, 1 something changes, above
1 an error (5: a proposed policy is invalid).`,
		Example: `  kubectl cleanup diff -f policies/
  kubectl cleanup diff -f policies/ --snapshot hub.json -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := d.run(cmd.Context(), o)
			// Differences are an outcome, told by the output and the status.
			cmd.SilenceErrors = errors.Is(err, errDiffers)
			return err
		},
	}
	cmd.Flags().StringSliceVarP(&d.files, "filename", "f", nil, "Files or directories of the proposed CleanupPolicies (repeatable).")
	cmd.Flags().StringVar(&d.snapshot, "snapshot", "", "Read the hub from this file (kubectl cleanup snapshot) instead of the API server.")
	cmd.Flags().BoolVar(&d.prune, "prune", false, "Count the live CleanupPolicies the files do not name as deleted.")
	return o.operatorNamespaceFlag(noNamespace(cmd, clusterScoped))
}

func (d *diffOptions) run(ctx context.Context, o *options) error {
	if err := o.checkOutput(); err != nil {
		return err
	}
	if len(d.files) == 0 {
		return usagef("-f/--filename: name the files or directories of the proposed CleanupPolicies")
	}
	proposed, notes, err := review.Read(d.files)
	if err != nil {
		return usagef("-f/--filename: %v", err)
	}
	for _, n := range notes {
		fmt.Fprintln(o.streams.ErrOut, "Note: "+n)
	}
	h, err := d.hub(ctx, o, proposed)
	if err != nil {
		return err
	}
	o.warn(h.Warnings)
	r, err := review.Diff(ctx, h, proposed, d.prune)
	var invalid *review.InvalidError
	if errors.As(err, &invalid) {
		return &invalidPolicy{err: err}
	}
	if err != nil {
		return err
	}
	if err := o.print(r, func(w io.Writer) { printDiff(w, r) }); err != nil {
		return err
	}
	if r.Differs() {
		return errDiffers
	}
	return nil
}

// warn prints each warning on standard error.
func (o *options) warn(warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(o.streams.ErrOut, "Warning: "+w+".")
	}
}

// hub is the snapshot --snapshot names, or one taken from the API server
// once it validated the proposed policies.
func (d *diffOptions) hub(ctx context.Context, o *options, proposed []*unstructured.Unstructured) (*review.Hub, error) {
	if d.snapshot != "" {
		return readHub(d.snapshot)
	}
	c, disc, err := o.hubClients()
	if err != nil {
		return nil, err
	}
	if err := dryRun(ctx, c, proposed, o.streams.ErrOut); err != nil {
		return nil, err
	}
	return review.Take(ctx, c, disc, proposed, true, o.settingsNamespace)
}

// hubClients connect to the API server the kubeconfig names.
func (o *options) hubClients() (client.Client, discovery.DiscoveryInterface, error) {
	c, err := o.client()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	return c, disc, err
}

// dryRun applies each proposed policy in a server-side dry run, so that the
// API server's validation (the CRD's schema, its rules, the admission
// webhook and policies) has its say. A user who may not write
// CleanupPolicies is told that this check was skipped.
func dryRun(ctx context.Context, c client.Client, proposed []*unstructured.Unstructured, errOut io.Writer) error {
	for _, p := range proposed {
		u := p.DeepCopy()
		u.SetResourceVersion("")
		u.SetManagedFields(nil)
		err := c.Patch(ctx, u, client.Apply, client.DryRunAll, client.FieldOwner("kubectl-cleanup-diff"), client.ForceOwnership) //nolint:staticcheck // unstructured apply
		switch {
		case apierrors.IsForbidden(err):
			fmt.Fprintf(errOut, "Note: the API server's validation of CleanupPolicy %s was skipped: %v\n", p.GetName(), err)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			return &invalidPolicy{err: fmt.Errorf("CleanupPolicy %s is invalid: %w", p.GetName(), err)}
		case err != nil:
			return fmt.Errorf("validating CleanupPolicy %s on the API server: %w", p.GetName(), err)
		}
	}
	return nil
}

// readHub reads a snapshot file (JSON, or YAML).
func readHub(path string) (*review.Hub, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--snapshot: %v", err)
	}
	h := &review.Hub{}
	if err := yaml.Unmarshal(raw, h); err != nil {
		return nil, usagef("--snapshot %s: %v", path, err)
	}
	if err := h.Check(); err != nil {
		return nil, usagef("--snapshot %s: %v", path, err)
	}
	return h, nil
}

func newSnapshotCommand(o *options) *cobra.Command {
	d := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Write what diff reads of the hub, as one JSON document",
		Long: `snapshot writes the hub as kubectl cleanup diff --snapshot reads it: the
resources the API server serves, the ManagedClusters, CleanupPolicies,
Namespaces, ManifestWorks, ConfigurationPolicies and Policies whole, the CRDs
of the expressions' variables, and the metadata of every resource the
CleanupPolicies' monitored resources and stages name (with -f, those of the
proposed policies too), in every namespace.

It holds too the settings the operator publishes in its namespace (its
blast radius, the namespaces it never deletes, how long teardown records are
kept, ...) and the labels and start, policy and end annotations of its
teardown records there, which the blast radius counts. What it cannot read
it says on standard error and in the snapshot's warnings: the operator's
default flags stand in for settings it cannot read.

It never holds Secrets (a policy naming them is refused by diff offline), nor
the data of a Secret written inside another object, nor managedFields (but a
deletion-signal work's) and last-applied annotations, nor Events.`,
		Example: `  kubectl cleanup snapshot > hub.json
  kubectl cleanup snapshot -f policies/ > hub.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			proposed, _, err := review.Read(d.files)
			if err != nil {
				return usagef("-f/--filename: %v", err)
			}
			c, disc, err := o.hubClients()
			if err != nil {
				return err
			}
			h, err := review.Take(cmd.Context(), c, disc, proposed, false, o.settingsNamespace)
			if err != nil {
				return err
			}
			o.warn(h.Warnings)
			if o.output == "" {
				o.output = "json"
			}
			return o.print(h, nil)
		},
	}
	cmd.Flags().StringSliceVarP(&d.files, "filename", "f", nil, "Files or directories of proposed CleanupPolicies whose resources to take too.")
	return o.operatorNamespaceFlag(noNamespace(cmd, clusterScoped))
}
