package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// confirmFieldManager is the field manager of the confirmations the plugin writes.
const confirmFieldManager = "kubectl-cleanup"

// confirmation is what confirm-delete did.
type confirmation struct {
	Cluster   string `json:"cluster"`
	Protected bool   `json:"protected"`
	// ConfirmedAt is the time written in the confirmation; empty when the
	// cluster is not protected and nothing was written.
	ConfirmedAt string `json:"confirmedAt,omitempty"`
	// Accepted says the operator accepted the confirmation: the cluster
	// may be deleted until it expires.
	Accepted bool `json:"accepted"`
}

func newConfirmDeleteCommand(o *options) *cobra.Command {
	var wait time.Duration
	cmd := noNamespace(&cobra.Command{
		Use:   "confirm-delete CLUSTER",
		Short: "Confirm the deletion of a deletion-protected ManagedCluster",
		Long: `confirm-delete confirms that a ManagedCluster protected from deletion (by the
spec.deletionProtection of the CleanupPolicy that governs it) may be deleted.
It sets the annotations ` + v1alpha1.DeleteConfirmedAnnotation + `=CLUSTER and
` + v1alpha1.DeleteConfirmedAtAnnotation + ` (now, RFC 3339), then waits until the
cleanup operator has accepted the confirmation. The confirmation counts for the
operator's --delete-confirmation-max-age (1h by default) from then; delete the
cluster with kubectl delete managedcluster CLUSTER within that time.

It exits 1 when there is nothing to confirm (the cluster is not protected
from deletion) and when the operator has not accepted the confirmation
within --wait, so that "confirm-delete CLUSTER && kubectl delete" deletes
only a cluster whose deletion was confirmed.`,
		Example:           `  kubectl cleanup confirm-delete prod-eu && kubectl delete managedcluster prod-eu`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeClusters,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			res, err := confirmDelete(cmd.Context(), c, args[0], time.Now(), wait)
			if res != nil {
				if perr := o.print(res, func(w io.Writer) { printConfirmation(w, res) }); perr != nil {
					return perr
				}
			}
			return err
		},
	}, clusterScoped)
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second,
		"How long to wait for the operator to accept the confirmation; 0 does not wait.")
	return cmd
}

// confirmDelete writes the confirmation on the cluster, if it is
// protected, and waits up to wait for the operator to accept it.
func confirmDelete(ctx context.Context, c client.Client, name string, now time.Time, wait time.Duration) (*confirmation, error) {
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(managedClusterGVK)
	switch err := c.Get(ctx, client.ObjectKey{Name: name}, mc); {
	case apierrors.IsNotFound(err):
		return nil, notFoundf("ManagedCluster %s not found", name)
	case err != nil:
		return nil, fmt.Errorf("reading ManagedCluster %s: %w", name, err)
	}
	res := &confirmation{Cluster: name, Protected: decision.IsProtected(mc)}
	if !res.Protected {
		return res, &refusal{msg: fmt.Sprintf("nothing confirmed: ManagedCluster %s is not protected from deletion", name)}
	}
	res.ConfirmedAt = now.UTC().Format(time.RFC3339)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		v1alpha1.DeleteConfirmedAnnotation:   name,
		v1alpha1.DeleteConfirmedAtAnnotation: res.ConfirmedAt,
	}}})
	if err != nil {
		return nil, err
	}
	if err := c.Patch(ctx, mc, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(confirmFieldManager)); err != nil {
		return nil, fmt.Errorf("confirming the deletion of ManagedCluster %s: %w", name, err)
	}
	if wait <= 0 {
		return res, nil
	}
	deadline := time.Now().Add(wait)
	for {
		if mc.GetAnnotations()[v1alpha1.DeleteConfirmationAcceptedAnnotation] == res.ConfirmedAt {
			res.Accepted = true
			return res, nil
		}
		if time.Now().After(deadline) {
			return res, &refusal{msg: fmt.Sprintf("the cleanup operator has not accepted the confirmation of ManagedCluster %s within %s: "+
				"is it running? Its Events on the cluster say why it refuses one (kubectl events --for managedcluster/%s)", name, wait, name)}
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			return res, fmt.Errorf("reading ManagedCluster %s: %w", name, err)
		}
	}
}

func printConfirmation(w io.Writer, res *confirmation) {
	switch {
	case !res.Protected:
		fmt.Fprintf(w, "ManagedCluster %s is not protected from deletion: nothing to confirm.\n", res.Cluster)
	case res.Accepted:
		fmt.Fprintf(w, "ManagedCluster %s: deletion confirmed at %s and accepted by the cleanup operator.\n", res.Cluster, res.ConfirmedAt)
		fmt.Fprintf(w, "Delete it within the confirmation's validity (1h unless the operator runs with another --delete-confirmation-max-age):\n")
		fmt.Fprintf(w, "  kubectl delete managedcluster %s\n", res.Cluster)
	default:
		fmt.Fprintf(w, "ManagedCluster %s: deletion confirmed at %s; the cleanup operator has not accepted it yet.\n", res.Cluster, res.ConfirmedAt)
	}
}

// protected lists the clusters that carry the deletion-protection mark,
// by name.
func (p *preview) protected(ctx context.Context) ([]string, error) {
	clusters := &metav1.PartialObjectMetadataList{}
	clusters.SetGroupVersionKind(managedClusterGVK.GroupVersion().WithKind("ManagedClusterList"))
	if err := p.client.List(ctx, clusters, client.MatchingLabels{v1alpha1.DeletionProtectedLabel: "true"}); err != nil {
		return nil, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	names := make([]string, 0, len(clusters.Items))
	for _, mc := range clusters.Items {
		if mc.DeletionTimestamp == nil {
			names = append(names, mc.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// printProtected lists, after the status, the clusters protected from deletion.
func printProtected(w io.Writer, names []string) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(w, "\nProtected from deletion (kubectl cleanup confirm-delete CLUSTER before deleting one): %s\n",
		decision.Bounded(names, ", "))
}
