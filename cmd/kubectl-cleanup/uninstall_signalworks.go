package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// retireSignalWorks removes the deletion-signal ManifestWorks without
// signalling a deletion: deleting one plainly would make the work agent
// delete its manifests on the managed cluster, which is the signal. Each
// work gets deleteOption Orphan, as the operator does when it retires one;
// it is deleted once the work agent has applied that generation, and the
// wait is only for clusters that are Available. What is not confirmed by the deadline stays, with its Orphan,
// and is reported: a second run finishes it.
func (u *uninstaller) retireSignalWorks(ctx context.Context, deadline time.Time) error {
	var works workv1.ManifestWorkList
	if err := u.c.List(ctx, &works, client.MatchingLabels{v1alpha1.SignalWorkLabel: "true"}); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("listing the deletion-signal ManifestWorks: %w", err)
	}
	pending, err := u.orphanSignalWorks(ctx, works.Items)
	if err != nil {
		return err
	}
	if u.dryRun {
		for _, name := range sortedValues(pending) {
			u.printf("ManifestWork %s: would delete once the work agent has applied its Orphan\n", name)
		}
		return nil
	}

	announced := map[types.UID]bool{}
	for {
		for i := range works.Items {
			w := &works.Items[i]
			name, ok := pending[w.UID]
			if !ok {
				continue
			}
			gone, err := u.retireSignalWork(ctx, w, name, announced)
			if err != nil {
				return err
			}
			if gone {
				delete(pending, w.UID)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if err := u.sleep(ctx, deadline); err != nil {
			return fmt.Errorf("the work agent did not confirm the Orphan of %s; they are left in place with "+
				"deleteOption Orphan (run this again): %w", strings.Join(sortedValues(pending), ", "), err)
		}
	}
}

// orphanSignalWorks gives deleteOption Orphan to the signal works the
// operator wrote (or says it would) and returns them, by UID, as
// namespace/name: the works to delete once the work agent applied it.
func (u *uninstaller) orphanSignalWorks(ctx context.Context, works []workv1.ManifestWork) (map[types.UID]string, error) {
	pending := map[types.UID]string{}
	for i := range works {
		w := &works[i]
		if w.DeletionTimestamp != nil {
			continue
		}
		name := w.Namespace + "/" + w.Name
		if !decision.IsSignalWork(w) {
			u.printf("ManifestWork %s: left in place: it has the label %s=true, but the operator did not write it "+
				"(it lacks the label %s=%s the operator's own signal works carry)\n",
				name, v1alpha1.SignalWorkLabel, v1alpha1.ManagedByLabel, v1alpha1.ManagedBy)
			continue
		}
		if u.signalWorks == signalWorksKeep {
			u.printf("ManifestWork %s: left in place (--signal-works=keep); deleting it later signals a deletion to cluster %s "+
				"unless it has deleteOption Orphan and the work agent applied it.\n", name, w.Namespace)
			continue
		}
		if !isOrphanWork(w) {
			u.printf("ManifestWork %s: %s deleteOption Orphan, so that deleting it leaves its manifests on cluster %s\n",
				name, u.verb("set", "would set"), w.Namespace)
			if !u.dryRun {
				if err := u.orphanWork(ctx, w); err != nil {
					if apierrors.IsNotFound(err) {
						continue
					}
					return nil, fmt.Errorf("ManifestWork %s: setting deleteOption Orphan: %w", name, err)
				}
			}
		}
		pending[w.UID] = name
	}
	return pending, nil
}

// retireSignalWork reads a pending signal work again and deletes it once
// the work agent has applied its Orphan. gone reports that it is pending no
// more: deleted, gone or replaced, or left in place because its cluster is
// not Available.
func (u *uninstaller) retireSignalWork(ctx context.Context, w *workv1.ManifestWork, name string, announced map[types.UID]bool) (gone bool, err error) {
	fresh := &workv1.ManifestWork{}
	if err := u.c.Get(ctx, client.ObjectKeyFromObject(w), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if fresh.UID != w.UID || fresh.DeletionTimestamp != nil {
		return true, nil
	}
	if !isOrphanWork(fresh) {
		return false, fmt.Errorf("ManifestWork %s: its deleteOption changed from Orphan to %v; left in place", name, fresh.Spec.DeleteOption)
	}
	if orphanApplied(fresh) {
		rv, uid := fresh.ResourceVersion, fresh.UID
		if err := u.c.Delete(ctx, fresh, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
			if apierrors.IsConflict(err) {
				return false, nil // changed meanwhile: look again
			}
			return false, fmt.Errorf("deleting ManifestWork %s: %w", name, err)
		}
		u.printf("ManifestWork %s: deleted; the work agent had applied its Orphan\n", name)
		return true, nil
	}
	available, err := u.clusterAvailable(ctx, w.Namespace)
	if err != nil {
		return false, err
	}
	if !available {
		u.printf("ManifestWork %s: left in place with deleteOption Orphan: cluster %s is not Available, so the work "+
			"agent cannot confirm the Orphan; run this again once it is\n", name, w.Namespace)
		return true, nil
	}
	if !announced[w.UID] {
		u.printf("ManifestWork %s: waiting for the work agent to apply its Orphan (generation %d)\n", name, fresh.Generation)
		announced[w.UID] = true
	}
	return false, nil
}

// orphanWork gives the work deleteOption Orphan with a merge patch that
// carries its UID and resourceVersion: it never changes a work recreated
// under the same name, and a concurrent change makes it read the work again.
// Only deleteOption changes; the manifests stay as they are.
func (u *uninstaller) orphanWork(ctx context.Context, w *workv1.ManifestWork) error {
	uid := w.UID
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &workv1.ManifestWork{}
		if err := u.c.Get(ctx, client.ObjectKeyFromObject(w), fresh); err != nil {
			return err
		}
		if fresh.UID != uid || fresh.DeletionTimestamp != nil {
			return apierrors.NewNotFound(workv1.Resource("manifestworks"), w.Name)
		}
		if isOrphanWork(fresh) {
			return nil
		}
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"resourceVersion":%q},"spec":{"deleteOption":{"propagationPolicy":"Orphan"}}}`,
			fresh.UID, fresh.ResourceVersion)
		return u.c.Patch(ctx, fresh, client.RawPatch(types.MergePatchType, []byte(patch)))
	})
}

func sortedValues(m map[types.UID]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func isOrphanWork(w *workv1.ManifestWork) bool {
	return w.Spec.DeleteOption != nil && w.Spec.DeleteOption.PropagationPolicy == workv1.DeletePropagationPolicyTypeOrphan
}

// orphanApplied says whether deleting the work leaves its manifests on the
// managed cluster: it carries Orphan, and the work agent applied that
// generation (its Applied condition observed it), as the operator requires.
func orphanApplied(w *workv1.ManifestWork) bool {
	if !isOrphanWork(w) {
		return false
	}
	applied := apimeta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	return applied != nil && applied.ObservedGeneration >= w.Generation
}

// clusterAvailable says whether the ManagedCluster named name is Available.
func (u *uninstaller) clusterAvailable(ctx context.Context, name string) (bool, error) {
	mc := &unstructured.Unstructured{}
	mc.SetGroupVersionKind(managedClusterGVK)
	if err := u.c.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	cond := findCondition(mc, clusterv1.ManagedClusterConditionAvailable)
	return cond != nil && cond["status"] == string(metav1.ConditionTrue), nil
}
