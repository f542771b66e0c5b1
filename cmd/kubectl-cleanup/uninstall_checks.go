package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/operator/heartbeat"
)

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
		cond := findCondition(&mc, v1alpha1.ContentDeleteSuccessCondition)
		if previewed(cond) {
			continue
		}
		if cond != nil {
			t.step, t.message = cond["reason"], cond["message"]
		}
		out = append(out, t)
	}
	return out, nil
}

// dryRunDeletions are the deleted ManagedClusters, by UID, whose policy
// is in dry run: the operator changes nothing for them, so releasing them
// cuts nothing.
func (u *uninstaller) dryRunDeletions(ctx context.Context) (map[types.UID]bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(managedClusterGVK.GroupVersion().WithKind("ManagedClusterList"))
	if err := u.c.List(ctx, list); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing ManagedClusters: %w", err)
	}
	out := map[types.UID]bool{}
	for _, mc := range list.Items {
		if mc.GetDeletionTimestamp() != nil && previewed(findCondition(&mc, v1alpha1.ContentDeleteSuccessCondition)) {
			out[mc.GetUID()] = true
		}
	}
	return out, nil
}

// previewed says whether a deleted cluster's ContentDeleteSuccess cond
// says its policy is in dry run and its teardown has not begun (DryRun,
// status Unknown): the operator changed nothing for it. DryRun with status
// False is a teardown begun, then turned to a dry run: half done.
func previewed(cond map[string]string) bool {
	return cond != nil && cond["reason"] == v1alpha1.DryRunReason && cond["status"] == string(metav1.ConditionUnknown)
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
			u.wouldRefuse = append(u.wouldRefuse, fmt.Sprintf("%d teardown(s) in progress", len(tds)))
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
				u.printf("Note: the operator does not seem to run (no Deployment with replicas, no renewed Lease, no live heartbeat); " +
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
// its manager with replicas, its leader-election Lease renewed recently,
// or the heartbeat of an operator process renewed recently, however the
// process was started. What cannot be read is a warning, not a sign.
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
	beats, err := heartbeat.List(ctx, u.c, "")
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("cannot list ConfigMaps (%v)", err))
	}
	now := u.now()
	for _, b := range beats {
		if b.Live(now) {
			signs = append(signs, fmt.Sprintf("operator process %s keeps its heartbeat ConfigMap %s/%s, renewed %s ago", b.Holder,
				b.Namespace, b.Name, max(b.Age(now), 0).Truncate(time.Second)))
		}
	}
	return signs, warnings
}

// howToStop says how to stop the operator, for each way it may run.
const howToStop = "helm uninstall, make undeploy, delete its OLM Subscription and CSV, or stop the process that runs it"

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
			u.wouldRefuse = append(u.wouldRefuse, "the operator still seems to run")
			return false, nil
		case !u.wait:
			return false, &refusal{msg: fmt.Sprintf("refusing: the operator still seems to run (%s); it would put its finalizers, "+
				"labels and admission policies back. Stop it first (%s), then run this again; --wait waits for it to go", what, howToStop)}
		}
		if what != last {
			u.printf("Waiting for the operator to stop: %s. Stop it now (%s).\n", what, howToStop)
			last = what
		}
		waited = true
		if err := u.sleep(ctx, deadline); err != nil {
			return false, fmt.Errorf("waiting for the operator to stop: %w", err)
		}
	}
}
