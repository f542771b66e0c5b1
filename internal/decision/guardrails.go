package decision

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// Hooks are the pre-cleanup hook annotations of a cluster, by key: while
// any remains, its cleanup holds before its first write.
func Hooks(cluster interface{ GetAnnotations() map[string]string }) []string {
	var out []string
	for key := range cluster.GetAnnotations() {
		if strings.HasPrefix(key, v1alpha1.PreCleanupHookPrefix) {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// Paused says whether the cluster carries the paused annotation with a
// value other than a false one ("false", "0", ...): a value the operator
// cannot read ("yes", "") pauses too, as no write beats a guess.
func Paused(cluster interface{ GetAnnotations() map[string]string }) bool {
	if cluster == nil {
		return false
	}
	v, ok := Annotation(cluster, v1alpha1.PausedAnnotation)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// suspension says why the operator makes no write for a cluster and what
// it governs: the cluster's paused annotation, the suspend of the policy
// that governs it, or the suspend of the policy its governing-policy
// annotation names (a suspended policy keeps the clusters it had, even
// those another policy's selector would take, until it is resumed; even
// while it is being deleted or does not decode). suspended are the names
// of the suspended policies, read raw. Empty: writes may be made.
func suspension(cluster *unstructured.Unstructured, governor *cel.Policy, suspended map[string]bool) string {
	if cluster != nil && Paused(cluster) {
		return fmt.Sprintf("paused by the annotation %s: %q on the ManagedCluster", v1alpha1.PausedAnnotation, cluster.GetAnnotations()[v1alpha1.PausedAnnotation])
	}
	if governor != nil && governor.Spec.Suspend {
		return fmt.Sprintf("suspended by CleanupPolicy %s (spec.suspend)", governor.Name)
	}
	if pin := Pin(cluster); pin != "" && suspended[pin] {
		return fmt.Sprintf("suspended by CleanupPolicy %s (spec.suspend), which the cluster names as its governor", pin)
	}
	return ""
}

// hooks adds, while pre-cleanup hooks remain, the step that holds the
// teardown before its first step: it writes nothing but the condition
// (Unknown: the cleanup has not started), and no strategy or timeout ever
// forces past it. The steps after it are planned, to say what follows. A
// cluster without hooks has no such step.
func (t *teardown) hooks() bool {
	hooks := Hooks(t.s.Cluster)
	if len(hooks) == 0 {
		return true
	}
	st := Step{Kind: StepHooks}
	for _, h := range hooks {
		st.Actions = append(st.Actions, Action{Verb: VerbHold, Resource: ManagedClustersResource, Name: t.plan.Cluster,
			For: "the pre-cleanup hook " + h + " to be removed"})
	}
	st.Report = &Report{Pending: true, Reason: v1alpha1.WaitingForHooksReason, Event: v1alpha1.WaitingForHooksReason, Action: "Hooks",
		Message: fmt.Sprintf("waiting for %d pre-cleanup hook(s) to be removed from the ManagedCluster: %s; nothing is written or deleted until the last one goes",
			len(hooks), strings.Join(hooks, ", "))}
	return t.add(st, false, false)
}

// resumed is the only step of the first teardown reconcile after the
// operator saw the cluster paused or its policy suspended: it writes the
// condition alone (Unknown, Resumed), and the timeout counts from it, as
// after pre-cleanup hooks, so that the time spent paused or suspended
// never lets a timeout force anything. A dry run reports its plan instead.
func (t *teardown) resumed() bool {
	if !t.s.Memory.Resumed || !t.plan.Deleting || t.plan.DryRun {
		return true
	}
	st := Step{Kind: StepResumed}
	st.Report = &Report{Pending: true, Reason: v1alpha1.ResumedReason, Action: "Resume",
		Message: "the cleanup resumes after a pause or a suspended policy; its timeout counts from now"}
	return t.add(st, false, false)
}

// CleanupStart is when the cleanup of a deleted cluster started, the
// moment its timeout counts from: its deletion, or, when pre-cleanup hooks
// held it or the cleanup resumed after a pause (reason Resumed), the
// moment the first step after that was reported (ContentDeleteSuccess
// turned from Unknown to False then). While hooks
// hold it (the condition is Unknown) it has not started: the start is now.
// A time spent held by hooks never lets a timeout force anything. ok is
// false for a cluster that is not being deleted.
func CleanupStart(s *Snapshot) (time.Time, bool) {
	ts := s.Cluster.GetDeletionTimestamp()
	if ts == nil {
		return time.Time{}, false
	}
	start := ts.Time
	for _, c := range ClusterConditions(s.Cluster) {
		if c.Type != v1alpha1.ContentDeleteSuccessCondition {
			continue
		}
		switch {
		case c.Status == metav1.ConditionUnknown && slices.Contains(notStarted, c.Reason):
			start = s.Now
		case c.Status == metav1.ConditionFalse && c.LastTransitionTime.After(start):
			start = c.LastTransitionTime.Time
		}
	}
	return start, true
}
