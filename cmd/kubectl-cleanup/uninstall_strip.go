package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// stripMeta removes the given finalizers, labels and annotations from an
// object, as a merge patch that carries the resourceVersion read: a
// concurrent change makes it fail with a conflict, and it is read and
// computed again. It says what it removed (or would remove).
//
// keep, when set, is asked again of the object as read before the patch: an
// object it keeps is not changed, and stripMeta returns keep's error.
func (u *uninstaller) stripMeta(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey,
	keep func(*metav1.PartialObjectMetadata) error, finalizers, labels, annotations []string) ([]string, error) {
	var removed []string
	err := u.whileMarkLingers(ctx, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(gvk)
			if err := u.c.Get(ctx, key, obj); err != nil {
				return err
			}
			if keep != nil {
				if err := keep(obj); err != nil {
					return err
				}
			}
			orig := obj.DeepCopy()
			removed = nil
			keptFinalizers := slices.DeleteFunc(slices.Clone(obj.Finalizers), func(f string) bool {
				if slices.Contains(finalizers, f) {
					removed = append(removed, "finalizer "+f)
					return true
				}
				return false
			})
			obj.SetFinalizers(keptFinalizers)
			for _, l := range labels {
				if _, ok := obj.Labels[l]; ok {
					delete(obj.Labels, l)
					removed = append(removed, "label "+l)
				}
			}
			for _, a := range annotations {
				if _, ok := obj.Annotations[a]; ok {
					delete(obj.Annotations, a)
					removed = append(removed, "annotation "+a)
				}
			}
			if len(removed) == 0 || u.dryRun {
				return nil
			}
			return u.c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		})
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return removed, err
}

// stripAll lists the objects of gvk and strips each, printing one line per
// object changed. skip leaves an object out silently; keep (asked of the
// object as listed, and again as read before its patch) leaves it out as an
// error that says why.
func (u *uninstaller) stripAll(ctx context.Context, gvk schema.GroupVersionKind, opts []client.ListOption,
	skip func(*metav1.PartialObjectMetadata) bool, keep func(*metav1.PartialObjectMetadata) error,
	finalizers, labels, annotations []string) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := u.c.List(ctx, list, opts...); err != nil {
		if apimeta.IsNoMatchError(err) {
			u.printf("%s: not served on this hub; nothing to remove.\n", gvk.Kind)
			return nil
		}
		return fmt.Errorf("listing %ss: %w", gvk.Kind, err)
	}
	var errs []error
	for i := range list.Items {
		item := &list.Items[i]
		if !carriesAny(item, finalizers, labels, annotations) || (skip != nil && skip(item)) {
			continue
		}
		name := displayName(item)
		if keep != nil {
			if err := keep(item); err != nil {
				if u.dryRun {
					u.printf("%s %s: would be %s\n", gvk.Kind, name, err)
				} else {
					errs = append(errs, fmt.Errorf("%s %s: %w", gvk.Kind, name, err))
				}
				continue
			}
		}
		removed, err := u.stripMeta(ctx, gvk, client.ObjectKeyFromObject(item), keep, finalizers, labels, annotations)
		if err != nil {
			if strings.Contains(err.Error(), "failed calling webhook") {
				err = fmt.Errorf("%w (a webhook that no longer answers refuses the change: if it is the operator's, "+
					"its ValidatingWebhookConfiguration outlived it; delete that)", err)
			}
			errs = append(errs, fmt.Errorf("%s %s: %w", gvk.Kind, name, err))
			continue
		}
		if len(removed) > 0 {
			u.printf("%s %s: %s %s\n", gvk.Kind, name, u.verb("removed", "would remove"), strings.Join(removed, ", "))
		}
	}
	return errors.Join(errs...)
}

func carriesAny(obj metav1.Object, finalizers, labels, annotations []string) bool {
	for _, f := range finalizers {
		if slices.Contains(obj.GetFinalizers(), f) {
			return true
		}
	}
	for _, l := range labels {
		if _, ok := obj.GetLabels()[l]; ok {
			return true
		}
	}
	for _, a := range annotations {
		if _, ok := obj.GetAnnotations()[a]; ok {
			return true
		}
	}
	return false
}

func displayName(obj metav1.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

func (u *uninstaller) verb(done, dry string) string {
	if u.dryRun {
		return dry
	}
	return done
}

// releaseClusters removes the operator's finalizer, annotations and
// deletion-protection mark from every ManagedCluster, and the deletion
// confirmations, which count for nothing without the operator. The
// ContentDeleteSuccess condition of a cluster that was cleaned up stays:
// it is status, and its history.
//
// A cluster being deleted is left as it is, unless its policy is in dry
// run: its teardown may have begun after the checks ran (with
// --ignore-running-operator the operator still runs), and removing the
// finalizer would cut it.
func (u *uninstaller) releaseClusters(ctx context.Context) error {
	dry, err := u.dryRunDeletions(ctx)
	if err != nil {
		return err
	}
	keep := func(obj *metav1.PartialObjectMetadata) error {
		if obj.DeletionTimestamp == nil || dry[obj.UID] {
			return nil
		}
		return fmt.Errorf("left in place: it is being deleted (since %s) and its teardown may be running; "+
			"run uninstall again once the cluster is gone", obj.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	return u.stripAll(ctx, managedClusterGVK, nil, nil, keep,
		[]string{v1alpha1.ClusterCleanupFinalizer}, []string{v1alpha1.DeletionProtectedLabel},
		append(slices.Clone(decision.ClusterAnnotations), v1alpha1.DeleteConfirmationAcceptedAnnotation,
			v1alpha1.DeleteConfirmedAnnotation, v1alpha1.DeleteConfirmedAtAnnotation))
}

// releasePolicies removes the in-use finalizer from CleanupPolicies. The
// policies themselves stay: they are the users'; deleting the CRD removes
// them.
func (u *uninstaller) releasePolicies(ctx context.Context) error {
	return u.stripAll(ctx, cleanupPolicyGVK, nil, nil, nil, []string{v1alpha1.InUseFinalizer}, nil, nil)
}

// unlabelNamespaces removes the label that makes admission refuse new
// works and add-ons in a cluster namespace, and the mark that holds OCM's
// own cleanup there.
func (u *uninstaller) unlabelNamespaces(ctx context.Context) error {
	return errors.Join(
		u.stripAll(ctx, namespaceGVK, []client.ListOption{client.HasLabels{v1alpha1.ClusterDeletingLabel}}, nil, nil,
			nil, []string{v1alpha1.ClusterDeletingLabel}, nil),
		u.stripAll(ctx, namespaceGVK, []client.ListOption{client.HasLabels{v1alpha1.GovernedNamespaceLabel}}, nil, nil,
			nil, []string{v1alpha1.GovernedNamespaceLabel}, []string{v1alpha1.GoverningPolicyAnnotation}))
}

// unannotateWorks removes the record of the operator's orphaning decision
// from ManifestWorks; the deleteOption itself stays. Signal works are
// retired whole, later.
func (u *uninstaller) unannotateWorks(ctx context.Context) error {
	return u.stripAll(ctx, manifestWorkGVK, nil, isSignalWork, nil, nil, nil, []string{v1alpha1.OrphaningAnnotation})
}

// unannotateConfigurationPolicies removes the record of the operator's
// prune decision; pruneObjectBehavior itself stays.
func (u *uninstaller) unannotateConfigurationPolicies(ctx context.Context) error {
	return u.stripAll(ctx, configurationPolicyGVK, nil, nil, nil, nil, nil, []string{v1alpha1.PruneAnnotation})
}

func isSignalWork(obj *metav1.PartialObjectMetadata) bool {
	return decision.IsSignalWork(obj)
}

// deleteAdmission deletes the operator's admission policy bindings, then
// the policies, but for the protection-mark policy, which deleteMarkPolicy
// deleted before, and the work-owner policy, which deleteWorkOwnerPolicy
// deletes once the signal works are retired.
func (u *uninstaller) deleteAdmission(ctx context.Context) error {
	_, err := u.deleteAdmissionObjects(ctx, func(obj client.Object) bool { return !isMarkObject(obj) && !isWorkOwnerObject(obj) })
	return err
}

// deleteWorkOwnerPolicy deletes the policy that lets only the operator
// label a work as its own, and its binding, once no signal work of the
// operator's is left: until then it keeps anyone from having uninstall
// orphan and delete a work of theirs as a signal work, in this run or a
// later one. Signal works kept (--signal-works=keep) keep it too: they are
// left as they are, the operator's.
func (u *uninstaller) deleteWorkOwnerPolicy(ctx context.Context) error {
	var works workv1.ManifestWorkList
	if err := u.c.List(ctx, &works, client.MatchingLabels{v1alpha1.SignalWorkLabel: "true"}); client.IgnoreNotFound(err) != nil &&
		!apimeta.IsNoMatchError(err) {
		return fmt.Errorf("listing the deletion-signal ManifestWorks: %w", err)
	}
	// A work being deleted is retired already.
	left := slices.ContainsFunc(works.Items, func(w workv1.ManifestWork) bool {
		return decision.IsSignalWork(&w) && w.DeletionTimestamp == nil
	})
	switch {
	case left && u.dryRun:
		u.printf("ValidatingAdmissionPolicy %s and its binding: would delete once the signal works above are gone\n",
			admissionpolicy.WorkOwnerPolicy)
		return nil
	case left:
		u.keptWorkOwner = true
		u.printf("ValidatingAdmissionPolicy %s: kept while the operator's signal works are left\n", admissionpolicy.WorkOwnerPolicy)
		return nil
	}
	_, err := u.deleteAdmissionObjects(ctx, isWorkOwnerObject)
	return err
}

func isWorkOwnerObject(obj client.Object) bool {
	return obj.GetName() == admissionpolicy.WorkOwnerPolicy || obj.GetName() == admissionpolicy.BindingName(admissionpolicy.WorkOwnerPolicy)
}

// deleteAdmissionObjects deletes the operator's admission objects that
// match, bindings first, and says whether it deleted any. An object of the
// same name that the operator did not create (its label is missing) is
// left and reported.
func (u *uninstaller) deleteAdmissionObjects(ctx context.Context, match func(client.Object) bool) (bool, error) {
	// The names are what matters here, whoever the policies were rendered for.
	objs := slices.DeleteFunc(admissionpolicy.AllObjects(""), func(obj client.Object) bool { return !match(obj) })
	// Bindings first: a binding without its policy refuses nothing, but
	// reads as a misconfiguration.
	sort.SliceStable(objs, func(i, j int) bool {
		return strings.HasSuffix(objs[i].GetName(), "-binding") && !strings.HasSuffix(objs[j].GetName(), "-binding")
	})
	var errs []error
	deleted := false
	for _, want := range objs {
		kind := want.GetObjectKind().GroupVersionKind().Kind
		got := &metav1.PartialObjectMetadata{}
		got.SetGroupVersionKind(want.GetObjectKind().GroupVersionKind())
		if err := u.c.Get(ctx, client.ObjectKey{Name: want.GetName()}, got); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				continue
			}
			errs = append(errs, fmt.Errorf("%s %s: %w", kind, want.GetName(), err))
			continue
		}
		if got.Labels["app.kubernetes.io/name"] != want.GetLabels()["app.kubernetes.io/name"] {
			u.printf("%s %s: left in place: it lacks the label app.kubernetes.io/name=cleanup-operator, so the operator did not create it.\n",
				kind, want.GetName())
			continue
		}
		u.printf("%s %s: %s\n", kind, want.GetName(), u.verb("deleted", "would delete"))
		if u.dryRun {
			continue
		}
		uid := got.UID
		if err := u.c.Delete(ctx, got, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", kind, want.GetName(), err))
			continue
		}
		deleted = true
	}
	return deleted, errors.Join(errs...)
}
