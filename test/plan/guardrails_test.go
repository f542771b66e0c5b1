package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

// The guard rails, proved on the audit log: pre-cleanup hooks hold a
// teardown before its first write and are never forced; a suspended
// policy, and a paused cluster, make the operator write nothing at all.

// guardPolicy is a policy selecting the clusters labelled with its name:
// a deletion signal, one orphaning rule, the default stages.
func guardPolicy(name string, strategy v1alpha1.RemoveStrategyType, timeout time.Duration) *v1alpha1.CleanupPolicy {
	p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.ClusterSelector = fmt.Sprintf("cluster.metadata.labels[?'%s'].orValue('') == '%s'", policyLabel, name)
	p.Spec.RemoveStrategy = v1alpha1.RemoveStrategy{Default: strategy, Timeout: &metav1.Duration{Duration: timeout}}
	p.Spec.DeletionSignal = &v1alpha1.DeletionSignal{Manifests: []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{
		Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cluster-alive","namespace":"kube-system"}}`)}}}}
	p.Spec.Orphaning = []v1alpha1.OrphaningRule{{Name: "keep-suffix", When: fmt.Sprintf("manifest.metadata.name.endsWith('%s')", keepSuffix)}}
	return p
}

// guardCluster is a cluster of the policy with a namespace and the works
// named, each with one ConfigMap manifest of its name.
func guardCluster(name string, p *v1alpha1.CleanupPolicy, works ...string) *cluster {
	c := &cluster{name: name, policy: p, available: true, strategy: p.Spec.RemoveStrategy.Default,
		labels: map[string]string{policyLabel: p.Name}}
	c.objects = append(c.objects, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{decision.OCMClusterNameLabel: name}}})
	for _, w := range works {
		c.objects = append(c.objects, guardWork(name, w))
	}
	return c
}

func guardWork(namespace, name string) *workv1.ManifestWork {
	raw := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default"}}`, name)
	return &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(raw)}}}}}}
}

// operatorRequests are every write request of the operator in the log,
// status and finalizer patches included (events are not logged).
func operatorRequests(events []auditEvent) []string {
	var out []string
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.User.Username != testenv.OperatorUser || e.ObjectRef.Resource == "" {
			continue
		}
		r := e.ObjectRef
		out = append(out, fmt.Sprintf("%s %s %s/%s/%s", e.Verb, e.resourceName(), r.Subresource, r.Namespace, r.Name))
	}
	return out
}

// operatorRequestsTo are the operator's write requests touching a cluster,
// its namespace or an object in it, status patches included.
func operatorRequestsTo(events []auditEvent, cluster string) []string {
	var out []string
	for i := range events {
		e := &events[i]
		if e.Stage == "ResponseComplete" && e.User.Username == testenv.OperatorUser && e.touches(cluster) {
			out = append(out, fmt.Sprintf("%s %s %s/%s/%s", e.Verb, e.resourceName(), e.ObjectRef.Subresource, e.ObjectRef.Namespace, e.ObjectRef.Name))
		}
	}
	return out
}

// eventsAbout counts the Events regarding the named ManagedCluster.
func (w *world) eventsAbout(ctx context.Context, name string) (int, error) {
	var list eventsv1.EventList
	if err := w.admin.List(ctx, &list); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Kind == "ManagedCluster" && e.Regarding.Name == name {
			n++
		}
	}
	return n, nil
}

func (w *world) condition(ctx context.Context, name string) (*metav1.Condition, error) {
	mc := newManagedCluster(name)
	if err := w.admin.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	raw, _ := json.Marshal(mc.Object["status"])
	var st struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	_ = json.Unmarshal(raw, &st)
	return apimeta.FindStatusCondition(st.Conditions, v1alpha1.ContentDeleteSuccessCondition), nil
}

func (w *world) patchCluster(ctx context.Context, name, patch string) error {
	return w.admin.Patch(ctx, newManagedCluster(name), client.RawPatch(types.MergePatchType, []byte(patch)))
}

func (w *world) patchPolicy(ctx context.Context, name, patch string) error {
	p := &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return w.admin.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// noWrites returns once the stretch has lasted, failing at the first
// write of the operator that counts (all of them when counts is nil).
func (w *world) noWrites(ctx context.Context, mark int64, stretch time.Duration, counts func(e *auditEvent) bool) error {
	end := time.Now().Add(stretch)
	for {
		events, err := w.audit.since(mark)
		if err != nil {
			return err
		}
		var got []string
		for i := range events {
			if e := &events[i]; counts == nil || counts(e) {
				got = append(got, operatorRequests(events[i:i+1])...)
			}
		}
		if len(got) > 0 {
			return fmt.Errorf("the operator wrote %d time(s): %s", len(got), strings.Join(got, "; "))
		}
		if !time.Now().Before(end) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readyReason is the reason of the Ready condition of a policy in an audit
// event's response, or "" if it has none.
func readyReason(raw json.RawMessage) string {
	var p v1alpha1.CleanupPolicy
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return c.Reason
	}
	return ""
}

// touchingAny counts the writes to the clusters (their namespaces and
// what is in them) and to the named policies.
func touchingAny(clusters []string, policies ...string) func(e *auditEvent) bool {
	return func(e *auditEvent) bool {
		for _, c := range clusters {
			if e.touches(c) {
				return true
			}
		}
		return e.ObjectRef.Resource == "cleanuppolicies" && slices.Contains(policies, e.ObjectRef.Name)
	}
}

func removed(ctx context.Context, w *world, name string) func() (bool, error) {
	return func() (bool, error) {
		_, _, gone, err := w.contentDeleteReason(ctx, name)
		return gone, err
	}
}

// TestHooksHoldTeardown: two pre-cleanup hooks hold a BestEffort teardown
// whose timeout passes meanwhile: nothing is written but the condition
// (Unknown, WaitingForHooks, naming both); removing one keeps holding;
// removing the second resumes, and the timeout that passed while held
// forces nothing. The plugin's plan lists the hooks, and the writes are
// those it planned.
func TestHooksHoldTeardown(t *testing.T) {
	w := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const timeout = 4 * time.Second
	p := guardPolicy("hooks-p", v1alpha1.RemoveStrategyBestEffort, timeout)
	c := guardCluster("hooks-c", p, "app", "db")
	f := &fleet{policies: []*v1alpha1.CleanupPolicy{p}, clusters: []*cluster{c}}
	t.Cleanup(func() { f.remove(w) })
	if err := w.steady(ctx, f); err != nil {
		t.Fatal(err)
	}
	hookA, hookB := v1alpha1.PreCleanupHookPrefix+"backup", v1alpha1.PreCleanupHookPrefix+"dns"
	if err := w.patchCluster(ctx, c.name, fmt.Sprintf(`{"metadata":{"annotations":{%q:"pending",%q:"pending"}}}`, hookA, hookB)); err != nil {
		t.Fatal(err)
	}
	// The plan the plugin shows before the deletion holds at the hooks.
	plan, raw, err := w.plan(ctx, c.name)
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Hooks []string `json:"hooks"`
	}
	if err := json.Unmarshal(raw, &listed); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(listed.Hooks, []string{hookA, hookB}) {
		t.Fatalf("the plan lists hooks %v, want %v", listed.Hooks, []string{hookA, hookB})
	}
	if len(plan.Steps) == 0 || plan.Steps[0].Kind != "hooks" || plan.Steps[0].State != "next" || len(plan.Steps[0].Actions) != 2 {
		t.Fatalf("the plan's first step is not the hooks' hold:\n%s", describePlan(plan))
	}
	for _, a := range plan.Steps[0].Actions {
		if a.Verb != "hold" {
			t.Fatalf("the hooks' step %s %s: want hold", a.Verb, a.Name)
		}
	}

	mark, err := w.audit.size()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.admin.Delete(ctx, newManagedCluster(c.name)); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	held := func(hooks ...string) func() (bool, error) {
		return func() (bool, error) {
			cond, err := w.condition(ctx, c.name)
			if err != nil || cond == nil {
				return false, err
			}
			for _, h := range hooks {
				if !strings.Contains(cond.Message, h) {
					return false, nil
				}
			}
			return cond.Status == metav1.ConditionUnknown && cond.Reason == v1alpha1.WaitingForHooksReason &&
				strings.Contains(cond.Message, fmt.Sprintf("%d pre-cleanup hook(s)", len(hooks))), nil
		}
	}
	if err := until(ctx, "the teardown to report both hooks", 100*time.Millisecond, held(hookA, hookB)); err != nil {
		t.Fatal(err)
	}
	// Held past the timeout: BestEffort would force by now.
	if err := until(ctx, "the timeout to pass while held", 200*time.Millisecond, func() (bool, error) {
		return time.Since(deleted) > timeout+time.Second, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.patchCluster(ctx, c.name, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, hookA)); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, "the teardown to report the hook left", 100*time.Millisecond, held(hookB)); err != nil {
		t.Fatal(err)
	}
	// A stretch held by the last hook: the condition is the only write.
	if err := w.noWrites(ctx, mark, 2*time.Second, func(e *auditEvent) bool {
		return e.touches(c.name) && e.ObjectRef.Subresource != "status"
	}); err != nil {
		t.Fatalf("held by hooks: %v", err)
	}
	events, err := w.audit.since(mark)
	if err != nil {
		t.Fatal(err)
	}
	if got := writesTo(events, testenv.OperatorUser, c.name); len(got) > 0 {
		t.Fatalf("held by hooks, the operator wrote: %v", got)
	}
	if err := w.patchCluster(ctx, c.name, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, hookB)); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, "the teardown to end once the last hook went", 100*time.Millisecond, removed(ctx, w, c.name)); err != nil {
		t.Fatalf("%v:%s", err, w.status(f))
	}
	if events, err = w.audit.since(mark); err != nil {
		t.Fatal(err)
	}
	writes := writesTo(events, testenv.OperatorUser, c.name)
	for _, wr := range writes {
		if wr.Verb == "force" || wr.Verb == "recordForcing" {
			t.Errorf("the timeout that passed while the hooks held forced: %s", wr)
		}
	}
	if cmp := compare(plan, writes); !cmp.ok() {
		t.Errorf("the writes differ from the plan taken while the hooks held:\n%s%s", cmp.report(), describePlan(plan))
	}
}

// TestSuspendMakesNoWrites: once the policy reports Suspended, a stretch of
// policy edits, a cluster deletion, a new cluster and work changes makes
// no write of the operator at all for a full minute of such edits;
// resuming completes everything.
func TestSuspendMakesNoWrites(t *testing.T) {
	w := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := guardPolicy("suspend-p", v1alpha1.RemoveStrategyRequired, time.Hour)
	c0, c1 := guardCluster("suspend-c0", p, "app"), guardCluster("suspend-c1", p, "app")
	c2 := guardCluster("suspend-c2", p, "app")
	f := &fleet{policies: []*v1alpha1.CleanupPolicy{p}, clusters: []*cluster{c0, c1}}
	t.Cleanup(func() { f.remove(w); _ = w.admin.Delete(context.Background(), newManagedCluster(c2.name)) })
	if err := w.steady(ctx, f); err != nil {
		t.Fatal(err)
	}
	suspendMark, err := w.audit.size()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.patchPolicy(ctx, p.Name, `{"spec":{"suspend":true}}`); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, "the policy to report Suspended", 100*time.Millisecond, func() (bool, error) {
		got := &v1alpha1.CleanupPolicy{}
		if err := w.admin.Get(ctx, client.ObjectKey{Name: p.Name}, got); err != nil {
			return false, err
		}
		ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition)
		return ready != nil && ready.Reason == v1alpha1.SuspendedReason && ready.Status == metav1.ConditionTrue &&
			got.Status.ObservedGeneration == got.Generation &&
			apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReconcilingCondition) == nil &&
			apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.StalledCondition) == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The suspend's one status write is in the log before the stretch. The
	// log may show it after the API does, and a write of the reconcile
	// before the suspend may come first: the one looked for is the write
	// whose response says Suspended.
	if err := until(ctx, "the suspend's status write to be logged", 100*time.Millisecond, func() (bool, error) {
		events, err := w.audit.since(suspendMark)
		return slices.ContainsFunc(events, func(e auditEvent) bool {
			return slices.Equal(operatorRequests([]auditEvent{e}), []string{"patch cleanuppolicies.cleanup.fleetops.dev status//" + p.Name}) &&
				readyReason(e.ResponseObject) == v1alpha1.SuspendedReason
		}), err
	}); err != nil {
		t.Fatal(err)
	}
	mark, err := w.audit.size()
	if err != nil {
		t.Fatal(err)
	}
	before, err := w.eventsAbout(ctx, c0.name)
	if err != nil {
		t.Fatal(err)
	}

	// The stretch: edits of the policy, a deletion, a new cluster, works
	// added and changed.
	if err := w.patchPolicy(ctx, p.Name, `{"spec":{"priority":7,"orphaning":[{"name":"all","when":"true"}]}}`); err != nil {
		t.Fatal(err)
	}
	if err := w.admin.Delete(ctx, newManagedCluster(c0.name)); err != nil {
		t.Fatal(err)
	}
	if err := (&fleet{clusters: []*cluster{c2}}).create(ctx, w.admin); err != nil {
		t.Fatal(err)
	}
	if err := w.admin.Create(ctx, guardWork(c1.name, "late"+keepSuffix)); err != nil {
		t.Fatal(err)
	}
	if err := w.admin.Patch(ctx, guardWork(c1.name, "app"), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"legacy":"true"}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := w.patchPolicy(ctx, p.Name, `{"spec":{"dryRun":false,"priority":8}}`); err != nil {
		t.Fatal(err)
	}
	// A full minute: the edits go on, and every few seconds the log is
	// read again for any write of the operator.
	touched := touchingAny([]string{c0.name, c1.name, c2.name}, p.Name)
	for end, i := time.Now().Add(time.Minute), 0; time.Now().Before(end); i++ {
		if err := w.patchPolicy(ctx, p.Name, fmt.Sprintf(`{"spec":{"priority":%d}}`, 10+i)); err != nil {
			t.Fatal(err)
		}
		if err := w.admin.Patch(ctx, guardWork(c1.name, "app"), client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{"edit":"e%d"}}}`, i)))); err != nil {
			t.Fatal(err)
		}
		if err := w.noWrites(ctx, mark, 5*time.Second, touched); err != nil {
			t.Fatalf("suspended, after %d round(s) of edits: %v", i+1, err)
		}
	}
	if after, err := w.eventsAbout(ctx, c0.name); err != nil || after != before {
		t.Fatalf("suspended: Events about %s went from %d to %d (%v)", c0.name, before, after, err)
	}
	// The deleted cluster waits under its finalizer; the plugin says why.
	plan, raw, err := w.plan(ctx, c0.name)
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Suspended string `json:"suspended"`
	}
	_ = json.Unmarshal(raw, &shown)
	if !strings.Contains(shown.Suspended, "suspended by CleanupPolicy "+p.Name) || plan.Policy != p.Name {
		t.Fatalf("the plan of %s does not say it is suspended: %s", c0.name, raw)
	}

	if err := w.patchPolicy(ctx, p.Name, `{"spec":{"suspend":null}}`); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, "the resumed policy to tear "+c0.name+" down", 100*time.Millisecond, removed(ctx, w, c0.name)); err != nil {
		t.Fatalf("%v:%s", err, w.status(f))
	}
	if err := until(ctx, "the resumed policy to govern "+c2.name+" and stamp the works of "+c1.name, 100*time.Millisecond, func() (bool, error) {
		mc := newManagedCluster(c2.name)
		if err := w.admin.Get(ctx, client.ObjectKey{Name: c2.name}, mc); err != nil {
			return false, err
		}
		if !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) {
			return false, nil
		}
		for _, name := range []string{"app", "late" + keepSuffix} {
			var wk workv1.ManifestWork
			if err := w.admin.Get(ctx, client.ObjectKey{Namespace: c1.name, Name: name}, &wk); err != nil {
				return false, err
			}
			if wk.Spec.DeleteOption == nil || wk.Spec.DeleteOption.PropagationPolicy != workv1.DeletePropagationPolicyTypeOrphan {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.CleanupPolicy{}
	if err := until(ctx, "the resumed policy to be Ready", 100*time.Millisecond, func() (bool, error) {
		if err := w.admin.Get(ctx, client.ObjectKey{Name: p.Name}, got); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ReadyCondition) && got.Status.ObservedGeneration == got.Generation, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPausedClusterMakesNoWrites: a paused cluster gets no write while its
// neighbour under the same policy does; removing the annotation resumes,
// and the first write of the resumed teardown is its Resumed condition
// alone: the BestEffort timeout that passed while paused counts from there.
func TestPausedClusterMakesNoWrites(t *testing.T) {
	w := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := guardPolicy("paused-p", v1alpha1.RemoveStrategyBestEffort, 2*time.Second)
	c0, c1 := guardCluster("paused-c0", p, "app"), guardCluster("paused-c1", p, "app")
	f := &fleet{policies: []*v1alpha1.CleanupPolicy{p}, clusters: []*cluster{c0, c1}}
	t.Cleanup(func() { f.remove(w) })
	if err := w.steady(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := w.patchCluster(ctx, c0.name, fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, v1alpha1.PausedAnnotation)); err != nil {
		t.Fatal(err)
	}
	// The pause counts from when the operator has seen it. A pause makes
	// no write to show that, but the ManagedClusters' watch delivers
	// events in order: once the operator governs a cluster created after
	// the pause, its cache holds the pause.
	c2 := guardCluster("paused-c2", p)
	f.clusters = append(f.clusters, c2)
	if err := (&fleet{clusters: []*cluster{c2}}).create(ctx, w.admin); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, "the operator to govern "+c2.name, 100*time.Millisecond, func() (bool, error) { return w.settled(ctx, c2) }); err != nil {
		t.Fatal(err)
	}
	mark, err := w.audit.size()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*cluster{c0, c1} {
		if err := w.admin.Create(ctx, guardWork(c.name, "late"+keepSuffix)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.admin.Delete(ctx, newManagedCluster(c0.name)); err != nil {
		t.Fatal(err)
	}
	// The neighbour's new work is stamped: the operator is at work.
	stamped := func(ns string) func() (bool, error) {
		return func() (bool, error) {
			var wk workv1.ManifestWork
			if err := w.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late" + keepSuffix}, &wk); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return wk.Spec.DeleteOption != nil && wk.Spec.DeleteOption.PropagationPolicy == workv1.DeletePropagationPolicyTypeOrphan, nil
		}
	}
	if err := until(ctx, "the work of "+c1.name+" to be stamped", 100*time.Millisecond, stamped(c1.name)); err != nil {
		t.Fatal(err)
	}
	if err := w.noWrites(ctx, mark, 3*time.Second, touchingAny([]string{c0.name})); err != nil {
		t.Fatalf("paused: %v", err)
	}
	plan, raw, err := w.plan(ctx, c0.name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), v1alpha1.PausedAnnotation) || plan.Policy != p.Name {
		t.Fatalf("the plan of %s does not say it is paused: %s", c0.name, raw)
	}
	resumed, err := w.audit.size()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.patchCluster(ctx, c0.name, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.PausedAnnotation)); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, "the unpaused cluster to be torn down", 100*time.Millisecond, removed(ctx, w, c0.name)); err != nil {
		t.Fatalf("%v:%s", err, w.status(f))
	}
	events, err := w.audit.since(resumed)
	if err != nil {
		t.Fatal(err)
	}
	var first *auditEvent
	for i := range events {
		if e := &events[i]; e.Stage == "ResponseComplete" && e.User.Username == testenv.OperatorUser && e.touches(c0.name) {
			first = e
			break
		}
	}
	if first == nil || first.ObjectRef.Resource != "managedclusters" || first.ObjectRef.Subresource != "status" ||
		!strings.Contains(string(first.RequestObject), `"reason":"`+v1alpha1.ResumedReason+`"`) {
		t.Fatalf("the resumed teardown's first write is not its %s condition: %s", v1alpha1.ResumedReason,
			strings.Join(operatorRequestsTo(events, c0.name), "; "))
	}
}

// TestDeletingSuspendedPolicyKeepsItsClusters: a suspended policy that is
// deleted keeps its in-use finalizer and its clusters: no write for them
// (neither released nor handed to another policy) until it is resumed.
func TestDeletingSuspendedPolicyKeepsItsClusters(t *testing.T) {
	w := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := guardPolicy("delsusp-p", v1alpha1.RemoveStrategyRequired, time.Hour)
	c0 := guardCluster("delsusp-c0", p, "app")
	f := &fleet{policies: []*v1alpha1.CleanupPolicy{p}, clusters: []*cluster{c0}}
	t.Cleanup(func() { _ = w.patchPolicy(context.Background(), p.Name, `{"spec":{"suspend":null}}`); f.remove(w) })
	if err := w.steady(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := w.patchPolicy(ctx, p.Name, `{"spec":{"suspend":true}}`); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, "the policy to report Suspended", 100*time.Millisecond, func() (bool, error) {
		got := &v1alpha1.CleanupPolicy{}
		if err := w.admin.Get(ctx, client.ObjectKey{Name: p.Name}, got); err != nil {
			return false, err
		}
		ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition)
		return ready != nil && ready.Reason == v1alpha1.SuspendedReason, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The status read above comes from the API server; the operator's cache
	// may lag it, and a reconcile in that window writes the same Suspended
	// status again. Mark once the operator has been quiet for a second.
	var mark int64
	if err := until(ctx, "the operator to stop writing", 100*time.Millisecond, func() (bool, error) {
		m, err := w.audit.size()
		if err != nil {
			return false, err
		}
		if w.noWrites(ctx, m, time.Second, touchingAny([]string{c0.name}, p.Name)) != nil {
			return false, nil
		}
		mark = m
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.admin.Delete(ctx, &v1alpha1.CleanupPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}); err != nil {
		t.Fatal(err)
	}
	if err := w.noWrites(ctx, mark, 3*time.Second, touchingAny([]string{c0.name}, p.Name)); err != nil {
		t.Fatalf("a deleting suspended policy: %v", err)
	}
	mc := newManagedCluster(c0.name)
	if err := w.admin.Get(ctx, client.ObjectKey{Name: c0.name}, mc); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(mc.GetFinalizers(), v1alpha1.ClusterCleanupFinalizer) || mc.GetAnnotations()[v1alpha1.GoverningPolicyAnnotation] != p.Name {
		t.Fatalf("the cluster of the deleting suspended policy was released: finalizers %v, annotations %v", mc.GetFinalizers(), mc.GetAnnotations())
	}
	got := &v1alpha1.CleanupPolicy{}
	if err := w.admin.Get(ctx, client.ObjectKey{Name: p.Name}, got); err != nil || !slices.Contains(got.Finalizers, v1alpha1.InUseFinalizer) {
		t.Fatalf("the deleting suspended policy is expected to wait under its in-use finalizer: %v %v", got.Finalizers, err)
	}
}
