package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/admissionpolicy"
)

// Names the teardown writes on a ManagedCluster, defined next to the code
// writing them; the plugin names them here so that it needs none of that
// code. A test checks that they agree.
const (
	// forcedObjectsAnnotation counts forced objects on a ManagedCluster.
	forcedObjectsAnnotation = "cleanup.fleetops.dev/forced-objects"
	// unconfirmedOrphansAnnotation lists, on a ManagedCluster, the works
	// deleted with an Orphan the work agent never confirmed.
	unconfirmedOrphansAnnotation = "cleanup.fleetops.dev/unconfirmed-orphans"
	// forcingAnnotation lists, on a ManagedCluster, the last batch of
	// objects the operator set out to force.
	forcingAnnotation = "cleanup.fleetops.dev/forcing"
)

// Signal-work modes of --signal-works.
const (
	signalWorksOrphan = "orphan"
	signalWorksKeep   = "keep"
)

var (
	managedClusterGVK      = schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster"}
	manifestWorkGVK        = schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWork"}
	configurationPolicyGVK = schema.GroupVersionKind{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy"}
	cleanupPolicyGVK       = v1alpha1.GroupVersion.WithKind("CleanupPolicy")
	namespaceGVK           = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
)

// uninstallScheme holds the types uninstall reads typed; everything else
// it reads as metadata or unstructured, so that it needs no CRD types.
func uninstallScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(workv1.Install(s))
	return s
}

// uninstaller removes from a hub what the operator wrote there.
type uninstaller struct {
	c   client.Client
	out io.Writer
	// dryRun prints what would change and changes nothing.
	dryRun bool
	// wait waits for teardowns in progress and for the operator to stop
	// instead of refusing.
	wait bool
	// timeout bounds every wait together.
	timeout time.Duration
	// interval is how often a wait looks again.
	interval time.Duration
	// ignoreOperator goes on while the operator seems to run.
	ignoreOperator bool
	// signalWorks is signalWorksOrphan or signalWorksKeep.
	signalWorks string
	now         func() time.Time
}

// refusal is the error of a refusal; its message says why and what to do.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func (u *uninstaller) printf(format string, args ...any) {
	fmt.Fprintf(u.out, format, args...)
}

// run checks that nothing is in the way, then removes the operator's
// finalizers, labels, annotations, admission policies and signal works.
func (u *uninstaller) run(ctx context.Context) error {
	switch u.signalWorks {
	case signalWorksOrphan, signalWorksKeep:
	default:
		return fmt.Errorf("--signal-works: %q is not one of %s, %s", u.signalWorks, signalWorksOrphan, signalWorksKeep)
	}
	if u.timeout <= 0 {
		return fmt.Errorf("--timeout: %s is not a positive duration", u.timeout)
	}
	if u.now == nil {
		u.now = time.Now
	}
	if u.interval <= 0 {
		u.interval = 2 * time.Second
	}
	deadline := u.now().Add(u.timeout)
	if u.dryRun {
		u.printf("Dry run: nothing is changed.\n")
	}
	if err := u.checkTeardowns(ctx, deadline); err != nil {
		return err
	}
	stopped, err := u.checkOperator(ctx, deadline)
	if err != nil {
		return err
	}
	if stopped {
		// A teardown started before the operator went: it will not end now.
		if err := u.checkTeardowns(ctx, time.Time{}); err != nil {
			return err
		}
	}

	var errs []error
	for _, step := range []func(context.Context) error{
		u.releaseClusters, u.releasePolicies, u.unlabelNamespaces, u.unannotateWorks,
		u.unannotateConfigurationPolicies, u.deleteAdmission,
	} {
		if err := step(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := u.retireSignalWorks(ctx, deadline); err != nil {
		errs = append(errs, err)
	}
	if err := u.reportKept(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if u.dryRun {
		u.printf("Dry run done: run again without --dry-run to make these changes.\n")
	} else {
		u.printf("Done: the hub no longer holds the operator's finalizers, labels, annotations or admission policies.\n")
	}
	return nil
}

// teardown is a ManagedCluster being deleted whose cleanup the operator
// has started and not finished.
type teardown struct {
	name, step, message string
}

// teardowns lists the deleted ManagedClusters that still carry the
// operator's finalizer. One whose policy is in dry run is not a teardown:
// the operator changes nothing for it, so releasing it leaves nothing
// half done.
func (u *uninstaller) teardowns(ctx context.Context) ([]teardown, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(managedClusterGVK.GroupVersion().WithKind("ManagedClusterList"))
	if err := u.c.List(ctx, list); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	var out []teardown
	for _, mc := range list.Items {
		if mc.GetDeletionTimestamp() == nil || !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
			continue
		}
		t := teardown{name: mc.GetName(), step: "no step reported yet"}
		if cond := findCondition(&mc, v1alpha1.ContentDeleteSuccessCondition); cond != nil {
			t.step, t.message = cond["reason"], cond["message"]
		}
		if t.step == v1alpha1.DryRunReason {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// findCondition returns the reason and message of a status condition of
// an unstructured object, or nil.
func findCondition(obj *unstructured.Unstructured, condType string) map[string]string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != condType {
			continue
		}
		out := map[string]string{}
		for _, k := range []string{"status", "reason", "message"} {
			if s, ok := m[k].(string); ok {
				out[k] = s
			}
		}
		return out
	}
	return nil
}

// checkTeardowns refuses while teardowns are in progress, or waits for
// them with --wait until deadline (a zero deadline: never waits).
func (u *uninstaller) checkTeardowns(ctx context.Context, deadline time.Time) error {
	last := ""
	for {
		tds, err := u.teardowns(ctx)
		if err != nil {
			return err
		}
		if len(tds) == 0 {
			if last != "" {
				u.printf("Every teardown has ended.\n")
			}
			return nil
		}
		names := make([]string, len(tds))
		for i, t := range tds {
			names[i] = t.name
		}
		if u.dryRun {
			u.printf("Would refuse now: %d teardown(s) in progress: %s (with --wait: wait for them).\n", len(tds), strings.Join(names, ", "))
			return nil
		}
		if !u.wait || deadline.IsZero() {
			msg := fmt.Sprintf("refusing: %d teardown(s) in progress: %s. Removing the operator's finalizer now would leave "+
				"their cleanup half done. Let them finish with the operator running, or run again with --wait", len(tds), strings.Join(names, ", "))
			if deadline.IsZero() {
				msg = fmt.Sprintf("refusing: %d teardown(s) did not end before the operator stopped: %s. Start the operator again, "+
					"then run `kubectl cleanup uninstall --wait`", len(tds), strings.Join(names, ", "))
			}
			return &refusal{msg: msg}
		}
		if last == "" {
			if signs, warnings := u.operatorSigns(ctx); len(signs) == 0 && len(warnings) == 0 {
				u.printf("Note: the operator does not seem to run (no Deployment with replicas, no renewed Lease); " +
					"teardowns move only while it runs.\n")
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Waiting for %d teardown(s) to end:\n", len(tds))
		for _, t := range tds {
			fmt.Fprintf(&b, "  %s: %s", t.name, t.step)
			if t.message != "" {
				fmt.Fprintf(&b, ": %s", t.message)
			}
			b.WriteString("\n")
		}
		if b.String() != last {
			u.printf("%s", b.String())
			last = b.String()
		}
		if err := u.sleep(ctx, deadline); err != nil {
			return fmt.Errorf("waiting for the teardowns of %s: %w", strings.Join(names, ", "), err)
		}
	}
}

// sleep waits one interval, or fails at the deadline.
func (u *uninstaller) sleep(ctx context.Context, deadline time.Time) error {
	if !u.now().Before(deadline) {
		return fmt.Errorf("--timeout %s passed", u.timeout)
	}
	t := time.NewTimer(u.interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// operatorSigns says what shows that the operator runs: a Deployment of
// its manager with replicas, or its leader-election Lease renewed
// recently. What cannot be read is a warning, not a sign.
func (u *uninstaller) operatorSigns(ctx context.Context) (signs, warnings []string) {
	// The manager's Deployment, from config/manager or the OLM bundle.
	var deployments appsv1.DeploymentList
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "cleanup-operator", "control-plane": "controller-manager"})
	if err := u.c.List(ctx, &deployments, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		warnings = append(warnings, fmt.Sprintf("cannot list Deployments (%v)", err))
	}
	for _, d := range deployments.Items {
		want := ptr.Deref(d.Spec.Replicas, 1)
		if want > 0 || d.Status.Replicas > 0 {
			signs = append(signs, fmt.Sprintf("Deployment %s/%s: %d of %d replica(s) running", d.Namespace, d.Name, d.Status.Replicas, want))
		}
	}
	var leases coordinationv1.LeaseList
	if err := u.c.List(ctx, &leases, client.MatchingFields{"metadata.name": v1alpha1.LeaderElectionID}); err != nil {
		warnings = append(warnings, fmt.Sprintf("cannot list Leases (%v)", err))
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
			continue
		}
		duration := 15 * time.Second
		if l.Spec.LeaseDurationSeconds != nil {
			duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		// Twice the duration: the holder's clock may differ from this one.
		if age := u.now().Sub(l.Spec.RenewTime.Time); age < 2*duration {
			signs = append(signs, fmt.Sprintf("Lease %s/%s is held by %s, renewed %s ago", l.Namespace, l.Name,
				*l.Spec.HolderIdentity, age.Truncate(time.Second)))
		}
	}
	return signs, warnings
}

// checkOperator refuses while the operator seems to run: it would put its
// finalizers and labels back. With --wait it waits until the operator has
// gone and says so (stopped). --ignore-running-operator goes on, loudly.
func (u *uninstaller) checkOperator(ctx context.Context, deadline time.Time) (stopped bool, err error) {
	waited := false
	last, lastWarnings := "", ""
	for {
		signs, warnings := u.operatorSigns(ctx)
		if w := strings.Join(warnings, "; "); w != lastWarnings {
			u.printf("Warning: cannot tell whether the operator still runs: %s.\n", w)
			lastWarnings = w
		}
		if len(signs) == 0 {
			return waited, nil
		}
		what := strings.Join(signs, "; ")
		switch {
		case u.ignoreOperator:
			u.printf("WARNING: the operator still seems to run (%s); it will put its finalizers, labels and admission "+
				"policies back. Going on as --ignore-running-operator asks.\n", what)
			return false, nil
		case u.dryRun:
			u.printf("Would refuse now: the operator still seems to run (%s).\n", what)
			return false, nil
		case !u.wait:
			return false, &refusal{msg: fmt.Sprintf("refusing: the operator still seems to run (%s); it would put its finalizers, "+
				"labels and admission policies back. Uninstall it first (make undeploy, or delete its OLM Subscription and CSV), "+
				"then run this again; --wait waits for it to go", what)}
		}
		if what != last {
			u.printf("Waiting for the operator to stop: %s. Uninstall it now (make undeploy, or delete its OLM Subscription and CSV).\n", what)
			last = what
		}
		waited = true
		if err := u.sleep(ctx, deadline); err != nil {
			return false, fmt.Errorf("waiting for the operator to stop: %w", err)
		}
	}
}

// stripMeta removes the given finalizers, labels and annotations from an
// object, as a merge patch that carries the resourceVersion read: a
// concurrent change makes it fail with a conflict, and it is read and
// computed again. It says what it removed (or would remove).
func (u *uninstaller) stripMeta(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey,
	finalizers, labels, annotations []string) ([]string, error) {
	var removed []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		if err := u.c.Get(ctx, key, obj); err != nil {
			return err
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
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return removed, err
}

// stripAll lists the objects of gvk and strips each, printing one line per
// object changed.
func (u *uninstaller) stripAll(ctx context.Context, gvk schema.GroupVersionKind, opts []client.ListOption,
	skip func(*metav1.PartialObjectMetadata) bool, finalizers, labels, annotations []string) error {
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
		removed, err := u.stripMeta(ctx, gvk, client.ObjectKeyFromObject(item), finalizers, labels, annotations)
		name := displayName(item)
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

// releaseClusters removes the operator's finalizer and annotations from
// every ManagedCluster. The ContentDeleteSuccess condition of a cluster
// that was cleaned up stays: it is status, and its history.
func (u *uninstaller) releaseClusters(ctx context.Context) error {
	return u.stripAll(ctx, managedClusterGVK, nil, nil,
		[]string{v1alpha1.ClusterCleanupFinalizer}, nil,
		[]string{v1alpha1.GoverningPolicyAnnotation, forcedObjectsAnnotation, forcingAnnotation, unconfirmedOrphansAnnotation})
}

// releasePolicies removes the in-use finalizer from CleanupPolicies. The
// policies themselves stay: they are the users'; deleting the CRD removes
// them.
func (u *uninstaller) releasePolicies(ctx context.Context) error {
	return u.stripAll(ctx, cleanupPolicyGVK, nil, nil, []string{v1alpha1.InUseFinalizer}, nil, nil)
}

// unlabelNamespaces removes the label that makes admission refuse new
// works and add-ons in a cluster namespace.
func (u *uninstaller) unlabelNamespaces(ctx context.Context) error {
	return u.stripAll(ctx, namespaceGVK, []client.ListOption{client.HasLabels{v1alpha1.ClusterDeletingLabel}}, nil,
		nil, []string{v1alpha1.ClusterDeletingLabel}, nil)
}

// unannotateWorks removes the record of the operator's orphaning decision
// from ManifestWorks; the deleteOption itself stays. Signal works are
// retired whole, later.
func (u *uninstaller) unannotateWorks(ctx context.Context) error {
	return u.stripAll(ctx, manifestWorkGVK, nil, isSignalWork, nil, nil, []string{v1alpha1.OrphaningAnnotation})
}

// unannotateConfigurationPolicies removes the record of the operator's
// prune decision; pruneObjectBehavior itself stays.
func (u *uninstaller) unannotateConfigurationPolicies(ctx context.Context) error {
	return u.stripAll(ctx, configurationPolicyGVK, nil, nil, nil, nil, []string{v1alpha1.PruneAnnotation})
}

func isSignalWork(obj *metav1.PartialObjectMetadata) bool {
	return obj.Labels[v1alpha1.SignalWorkLabel] == "true"
}

// deleteAdmission deletes the operator's admission policy bindings, then
// the policies. An object of the same name that the operator did not
// create (its label is missing) is left and reported.
func (u *uninstaller) deleteAdmission(ctx context.Context) error {
	objs := admissionpolicy.Objects()
	// Bindings first: a binding without its policy refuses nothing, but
	// reads as a misconfiguration.
	sort.SliceStable(objs, func(i, j int) bool {
		return strings.HasSuffix(objs[i].GetName(), "-binding") && !strings.HasSuffix(objs[j].GetName(), "-binding")
	})
	var errs []error
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
		}
	}
	return errors.Join(errs...)
}

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
	pending := map[types.UID]string{}
	for i := range works.Items {
		w := &works.Items[i]
		if w.DeletionTimestamp != nil {
			continue
		}
		name := w.Namespace + "/" + w.Name
		if !writtenByOperator(w) {
			u.printf("ManifestWork %s: left in place: it has the label %s=true, but the operator did not write it "+
				"(neither the annotation %s nor the label %s=%s)\n",
				name, v1alpha1.SignalWorkLabel, v1alpha1.SpecHashAnnotation, v1alpha1.ManagedByLabel, v1alpha1.ManagedBy)
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
					return fmt.Errorf("ManifestWork %s: setting deleteOption Orphan: %w", name, err)
				}
			}
		}
		pending[w.UID] = name
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
			fresh := &workv1.ManifestWork{}
			if err := u.c.Get(ctx, client.ObjectKeyFromObject(w), fresh); err != nil {
				if apierrors.IsNotFound(err) {
					delete(pending, w.UID)
					continue
				}
				return err
			}
			if fresh.UID != w.UID || fresh.DeletionTimestamp != nil {
				delete(pending, w.UID)
				continue
			}
			if !isOrphanWork(fresh) {
				return fmt.Errorf("ManifestWork %s: its deleteOption changed from Orphan to %v; left in place", name, fresh.Spec.DeleteOption)
			}
			if orphanApplied(fresh) {
				rv, uid := fresh.ResourceVersion, fresh.UID
				if err := u.c.Delete(ctx, fresh, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
					if apierrors.IsConflict(err) {
						continue // changed meanwhile: look again
					}
					return fmt.Errorf("deleting ManifestWork %s: %w", name, err)
				}
				u.printf("ManifestWork %s: deleted; the work agent had applied its Orphan\n", name)
				delete(pending, w.UID)
				continue
			}
			available, err := u.clusterAvailable(ctx, w.Namespace)
			if err != nil {
				return err
			}
			if !available {
				u.printf("ManifestWork %s: left in place with deleteOption Orphan: cluster %s is not Available, so the work "+
					"agent cannot confirm the Orphan; run this again once it is\n", name, w.Namespace)
				delete(pending, w.UID)
				continue
			}
			if !announced[w.UID] {
				u.printf("ManifestWork %s: waiting for the work agent to apply its Orphan (generation %d)\n", name, fresh.Generation)
				announced[w.UID] = true
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

// writtenByOperator says whether the operator applied the signal work: it
// labels its own objects as managed by it, and writes the hash of what it
// applied. A work that someone else labelled is theirs.
func writtenByOperator(w *workv1.ManifestWork) bool {
	_, hashed := w.Annotations[v1alpha1.SpecHashAnnotation]
	return hashed || w.Labels[v1alpha1.ManagedByLabel] == v1alpha1.ManagedBy
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

// reportKept says what stays on purpose.
func (u *uninstaller) reportKept(ctx context.Context) error {
	cms := &metav1.PartialObjectMetadataList{}
	cms.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"})
	if err := u.c.List(ctx, cms, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedBy},
		client.MatchingFields{"metadata.name": v1alpha1.DecisionsConfigMap}); err != nil {
		return fmt.Errorf("listing the %s ConfigMaps: %w", v1alpha1.DecisionsConfigMap, err)
	}
	u.printf("Left in place on purpose:\n")
	u.printf("  the deleteOption of ManifestWorks and the pruneObjectBehavior of ConfigurationPolicies: real settings, " +
		"now yours to keep or change;\n")
	for _, cm := range cms.Items {
		u.printf("  ConfigMap %s/%s: hub templates may read it; deleting it while they do makes the policy framework delete "+
			"their ConfigurationPolicies on the managed clusters. Delete it once no template references it;\n", cm.Namespace, cm.Name)
	}
	u.printf("  the CleanupPolicies and their CRD: delete the CRD (kubectl delete crd cleanuppolicies.cleanup.fleetops.dev) to remove them.\n")
	return nil
}

func newUninstallCommand(o *options) *cobra.Command {
	u := &uninstaller{timeout: 30 * time.Minute, signalWorks: signalWorksOrphan}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what the operator put on the hub, once the operator is gone",
		Long: `uninstall removes from the hub every finalizer, label, annotation and admission
policy the cleanup operator put there, so that the hub deletes ManagedClusters
as it would without the operator:

  - the finalizer cleanup.fleetops.dev/cluster-cleanup and the annotations
    cleanup.fleetops.dev/policy, cleanup.fleetops.dev/forced-objects,
    cleanup.fleetops.dev/forcing and cleanup.fleetops.dev/unconfirmed-orphans
    from ManagedClusters;
  - the finalizer cleanup.fleetops.dev/in-use from CleanupPolicies;
  - the label cleanup.fleetops.dev/cluster-deleting from namespaces;
  - the annotations cleanup.fleetops.dev/orphaning from ManifestWorks and
    cleanup.fleetops.dev/prune from ConfigurationPolicies;
  - the ValidatingAdmissionPolicies cleanup-operator-deleting-cluster and
    cleanup-operator-deleting-work, and their bindings;
  - the deletion-signal ManifestWorks, without signalling a deletion: each
    gets deleteOption Orphan and is deleted once the work agent applied it
    (--signal-works=keep leaves them as they are).

It leaves the deleteOption of ManifestWorks and the pruneObjectBehavior of
ConfigurationPolicies (real settings), the cleanup-decisions ConfigMaps (hub
templates may read them) and the CleanupPolicies.

Uninstall the operator first (make undeploy, or delete its OLM Subscription
and CSV): a running operator would put its finalizers back, and uninstall
refuses while its Deployment has replicas or its leader-election Lease is
renewed. It also refuses while a teardown is in progress (a deleted
ManagedCluster with the operator's finalizer): removing the finalizer would
leave that cleanup half done. --wait waits for both instead: run it before
you uninstall the operator, and uninstall the operator once it says the
teardowns have ended.`,
		Example: `  kubectl cleanup uninstall --dry-run
  kubectl cleanup uninstall --wait --timeout 1h
  kubectl cleanup uninstall`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "" {
				return fmt.Errorf("--output: uninstall prints text only")
			}
			cfg, err := o.kube.ToRESTConfig()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: uninstallScheme()})
			if err != nil {
				return err
			}
			u.c, u.out = c, o.streams.Out
			return u.run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&u.dryRun, "dry-run", false, "Print what would change, and what is in the way, and change nothing.")
	cmd.Flags().BoolVar(&u.wait, "wait", false, "Wait for the teardowns in progress to end and for the operator to stop, instead of refusing.")
	cmd.Flags().DurationVar(&u.timeout, "timeout", u.timeout, "How long to wait, for teardowns, the operator and the work agent together.")
	cmd.Flags().BoolVar(&u.ignoreOperator, "ignore-running-operator", false,
		"Go on although the operator seems to run (for a stale Lease or Deployment you know is not the operator's).")
	cmd.Flags().StringVar(&u.signalWorks, "signal-works", u.signalWorks,
		"What to do with the deletion-signal ManifestWorks: orphan (set deleteOption Orphan, delete once the work agent applied it) or keep.")
	return cmd
}
