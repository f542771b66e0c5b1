package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// released is what release did.
type released struct {
	Policy string `json:"policy"`
	// Released are the clusters whose held teardowns the release reaches.
	Released []string `json:"released"`
	// NotHeld are the clusters named that the blast radius does not hold.
	NotHeld []string `json:"notHeld,omitempty"`
	// Value is the annotation written: "<count>/<time>".
	Value string `json:"value,omitempty"`
}

func newReleaseCommand(o *options) *cobra.Command {
	var policy string
	var clusters []string
	cmd := noNamespace(&cobra.Command{
		Use:   "release --policy POLICY [--clusters A,B]",
		Short: "Release teardowns the blast radius of a CleanupPolicy holds",
		Long: `release lets teardowns held by a CleanupPolicy's blast radius (reason
BlastRadiusExceeded on the ManagedCluster's ContentDeleteSuccess condition) go
on. It writes the annotation ` + v1alpha1.BlastRadiusReleasedAnnotation + `
("<count>/<time>": how many clusters this release names, and now in RFC 3339)
on each held cluster of the policy, or on those --clusters names. The operator
accepts a release written after the cluster's deletion, not one from before
it: a release never reaches a deletion that comes after it. Only a user who
may ` + admissionpolicy.ReleaseVerb + ` cleanuppolicies/` + admissionpolicy.ReleaseSubresource + ` of the CleanupPolicy (granted on purpose:
no right on the policies themselves carries it) may release its teardowns:
the admission policy ` + admissionpolicy.ReleasePolicy + ` refuses anyone else.

It exits 1 when no teardown of the policy is held (or none of those named),
and 3 when a named cluster does not exist.`,
		Example: `  kubectl cleanup release --policy fleet
  kubectl cleanup release --policy fleet --clusters prod-eu-1,prod-eu-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if policy == "" {
				return usagef("--policy is required")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			res, err := release(cmd.Context(), c, policy, clusters, time.Now())
			if res != nil {
				if perr := o.print(res, func(w io.Writer) { printRelease(w, res) }); perr != nil {
					return perr
				}
			}
			return err
		},
	}, clusterScoped)
	cmd.Flags().StringVar(&policy, "policy", "", "The CleanupPolicy whose held teardowns are released.")
	cmd.Flags().StringSliceVar(&clusters, "clusters", nil, "Release only these ManagedClusters' teardowns (comma-separated); default every one the policy holds.")
	_ = cmd.RegisterFlagCompletionFunc("clusters", o.completeClusters)
	return cmd
}

// heldByBlastRadius says whether the blast radius holds the cluster's teardown.
func heldByBlastRadius(mc *unstructured.Unstructured) bool {
	c := decision.ClusterCondition(mc, v1alpha1.ContentDeleteSuccessCondition)
	return mc.GetDeletionTimestamp() != nil && c != nil && c.Reason == v1alpha1.BlastRadiusExceededReason
}

// release writes the release annotation on the held clusters of policy
// (those of names, when given).
func release(ctx context.Context, c client.Client, policy string, names []string, now time.Time) (*released, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(managedClusterGVK.GroupVersion().WithKind("ManagedClusterList"))
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	res := &released{Policy: policy, Released: []string{}}
	var held []*unstructured.Unstructured
	found := map[string]bool{}
	for i := range list.Items {
		mc := &list.Items[i]
		found[mc.GetName()] = true
		if len(names) > 0 && !slices.Contains(names, mc.GetName()) {
			continue
		}
		if decision.Pin(mc) == policy && heldByBlastRadius(mc) {
			held = append(held, mc)
		} else if len(names) > 0 {
			res.NotHeld = append(res.NotHeld, mc.GetName())
		}
	}
	for _, n := range names {
		if !found[n] {
			return nil, notFoundf("ManagedCluster %s not found", n)
		}
	}
	switch {
	case len(held) > 0:
	case len(names) == 0:
		return res, &refusal{msg: fmt.Sprintf("nothing released: CleanupPolicy %s's blast radius holds no teardown", policy)}
	case len(names) == 1:
		return res, &refusal{msg: fmt.Sprintf("nothing released: CleanupPolicy %s's blast radius holds no teardown of the cluster named: %s", policy, names[0])}
	default:
		return res, &refusal{msg: fmt.Sprintf("nothing released: CleanupPolicy %s's blast radius holds no teardown of the clusters named: %s",
			policy, strings.Join(names, ", "))}
	}
	res.Value = strconv.Itoa(len(held)) + "/" + now.UTC().Format(time.RFC3339)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		v1alpha1.BlastRadiusReleasedAnnotation: res.Value}}})
	if err != nil {
		return nil, err
	}
	for _, mc := range held {
		if err := c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(confirmFieldManager)); err != nil {
			return res, fmt.Errorf("releasing the teardown of ManagedCluster %s: %w", mc.GetName(), err)
		}
		res.Released = append(res.Released, mc.GetName())
	}
	return res, nil
}

func printRelease(w io.Writer, res *released) {
	for _, n := range res.Released {
		fmt.Fprintf(w, "ManagedCluster %s: teardown released (%s=%s).\n", n, v1alpha1.BlastRadiusReleasedAnnotation, res.Value)
	}
	for _, n := range res.NotHeld {
		fmt.Fprintf(w, "ManagedCluster %s: not held by the blast radius of CleanupPolicy %s; nothing written.\n", n, res.Policy)
	}
}
