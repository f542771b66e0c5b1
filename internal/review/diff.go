package review

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"github.com/fleetops-dev/cleanup-operator/internal/settings"
	"github.com/fleetops-dev/cleanup-operator/internal/snapshot"
	webhook "github.com/fleetops-dev/cleanup-operator/internal/webhook/v1alpha1"
)

// ReportAPIVersion and ReportKind name the machine-readable form of a diff.
const (
	ReportAPIVersion = "cleanup.fleetops.dev/v1alpha1"
	ReportKind       = "CleanupDiff"
)

// Report is what a change of CleanupPolicies changes, per cluster.
type Report struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Policies   []PolicyChange `json:"policies"`
	// Clusters are the clusters whose decisions change, by name.
	Clusters []ClusterDiff `json:"clusters"`
	// Unchanged counts the clusters whose decisions stay the same.
	Unchanged int `json:"unchanged"`
	// Holds are, for each policy whose blast radius would hold other
	// teardowns after the change than today, the clusters it holds.
	Holds []PolicyHolds `json:"holds,omitempty"`
}

// PolicyHolds are the teardowns of clusters being deleted that a policy's
// blast radius holds, today and after the change: "cluster (reason)".
type PolicyHolds struct {
	Policy string   `json:"policy"`
	Today  []string `json:"today"`
	After  []string `json:"after"`
}

// PolicyChange is what becomes of one CleanupPolicy.
type PolicyChange struct {
	Name string `json:"name"`
	// Change is added, changed, deleted (--prune) or unchanged.
	Change string `json:"change"`
}

// ClusterDiff is one cluster, today and after the change.
type ClusterDiff struct {
	Cluster string `json:"cluster"`
	// Changes name the fields that differ: governance, strategy,
	// blastRadius, protection, delete, orphan, keep, hold, prune.
	Changes []string `json:"changes"`
	Today   Side     `json:"today"`
	After   Side     `json:"after"`
}

// Differs says whether the change changes anything.
func (r *Report) Differs() bool {
	return len(r.Clusters) > 0 || slices.ContainsFunc(r.Policies, func(p PolicyChange) bool { return p.Change != "unchanged" })
}

// InvalidError is a proposed policy admission would refuse.
type InvalidError struct {
	Policy string
	Errs   field.ErrorList
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("CleanupPolicy %s is invalid: %s", e.Policy, e.Errs.ToAggregate())
}

// Decisions are the plans of every cluster of a hub, today and after a
// change of its CleanupPolicies.
type Decisions struct {
	Policies []PolicyChange
	// Clusters are the names of the ManagedClusters, sorted.
	Clusters []string
	Today    map[string]*decision.Plan
	After    map[string]*decision.Plan
}

// Diff decides every cluster of the hub with its CleanupPolicies (today),
// and with the proposed ones in place of those of the same name (after),
// and reports the clusters whose decisions change; prune treats the live
// policies not proposed as deleted.
func Diff(ctx context.Context, h *Hub, proposed []*unstructured.Unstructured, prune bool) (*Report, error) {
	d, err := Decide(ctx, h, proposed, prune)
	if err != nil {
		return nil, err
	}
	r := &Report{APIVersion: ReportAPIVersion, Kind: ReportKind, Policies: d.Policies, Clusters: []ClusterDiff{}}
	for _, name := range d.Clusters {
		c := ClusterDiff{Cluster: name, Today: sideOf(d.Today[name]), After: sideOf(d.After[name])}
		if c.Changes = changes(c.Today, c.After); len(c.Changes) == 0 {
			r.Unchanged++
			continue
		}
		r.Clusters = append(r.Clusters, c)
	}
	r.Holds = holds(d)
	return r, nil
}

// holds lists, by policy, the teardowns its blast radius holds today and
// after, for the policies where they differ.
func holds(d *Decisions) []PolicyHolds {
	byPolicy := map[string]*PolicyHolds{}
	note := func(plan *decision.Plan, after bool) {
		s := sideOf(plan)
		if s.BlastRadius == "" {
			return
		}
		h := byPolicy[s.Policy]
		if h == nil {
			h = &PolicyHolds{Policy: s.Policy, Today: []string{}, After: []string{}}
			byPolicy[s.Policy] = h
		}
		reason, _, _ := strings.Cut(s.BlastRadius, ":")
		held := plan.Cluster + " (" + reason + ")"
		if after {
			h.After = append(h.After, held)
		} else {
			h.Today = append(h.Today, held)
		}
	}
	for _, name := range d.Clusters {
		note(d.Today[name], false)
		note(d.After[name], true)
	}
	var out []PolicyHolds
	for _, h := range byPolicy {
		if !slices.Equal(h.Today, h.After) {
			out = append(out, *h)
		}
	}
	slices.SortFunc(out, func(a, b PolicyHolds) int { return strings.Compare(a.Policy, b.Policy) })
	return out
}

// Decide takes the plans Diff compares. The proposed policies get the
// CleanupPolicy CRD's defaults and are compiled first, as admission
// compiles them.
func Decide(ctx context.Context, h *Hub, proposed []*unstructured.Unstructured, prune bool) (*Decisions, error) {
	s, err := newStore(h)
	if err != nil {
		return nil, err
	}
	env, err := envOf(ctx, s)
	if err != nil {
		return nil, err
	}
	if proposed, err = defaulted(ctx, s, proposed); err != nil {
		return nil, err
	}
	st := h.Operator
	if st == nil {
		st = settings.Defaults(record.Namespace(""))
	}
	if err := Validate(env, st, proposed); err != nil {
		return nil, err
	}
	live, err := snapshot.ListPolicies(ctx, s)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	after, policyChanges := propose(live, proposed, prune, now)
	d := &Decisions{Policies: policyChanges, Today: map[string]*decision.Plan{}, After: map[string]*decision.Plan{}}
	today, next := newPlanner(s, env, st, h.Records, now), newPlanner(s.withPolicies(after), env, st, h.Records, now)
	clusters := snapshot.NewManagedClusterList()
	if err := s.List(ctx, clusters); err != nil {
		return nil, err
	}
	for _, c := range clusters.Items {
		d.Clusters = append(d.Clusters, c.GetName())
	}
	slices.Sort(d.Clusters)
	for _, name := range d.Clusters {
		if d.Today[name], err = today.plan(ctx, name); err != nil {
			return nil, err
		}
		if d.After[name], err = next.plan(ctx, name); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Validate decodes and compiles each proposed policy as the admission
// webhook of an operator of settings st does; the first refused one is
// returned, its fields named.
func Validate(env *cel.Env, st *settings.Settings, proposed []*unstructured.Unstructured) error {
	for _, u := range proposed {
		p, errs := cel.DecodePolicy(u.Object)
		if len(errs) == 0 {
			_, errs = cel.Compile(env, p)
		}
		if len(errs) == 0 && p.Spec.DeletionSignal != nil {
			errs = st.SignalLimits().Check(p.Spec.DeletionSignal.Manifests)
		}
		if len(errs) == 0 {
			errs = webhook.CheckWindow(p.Spec.BlastRadius, st.TeardownRecordMaxAge.Duration)
		}
		if len(errs) > 0 {
			return &InvalidError{Policy: u.GetName(), Errs: errs}
		}
	}
	return nil
}

// propose is the policies after the change: each proposed one in place of
// the live one of its name (its identity kept, its generation the next),
// the new ones created now, and with prune the others being deleted.
func propose(live []unstructured.Unstructured, proposed []*unstructured.Unstructured, prune bool, now time.Time) ([]*unstructured.Unstructured, []PolicyChange) {
	byName := map[string]*unstructured.Unstructured{}
	for _, u := range proposed {
		byName[u.GetName()] = u
	}
	var out []*unstructured.Unstructured
	var changes []PolicyChange
	for i := range live {
		l := &live[i]
		p, ok := byName[l.GetName()]
		switch {
		case ok && sameSpec(l.Object["spec"], p.Object["spec"]):
			out = append(out, l)
			changes = append(changes, PolicyChange{Name: l.GetName(), Change: "unchanged"})
		case ok:
			u := p.DeepCopy()
			u.SetUID(l.GetUID())
			u.SetGeneration(l.GetGeneration() + 1)
			u.SetCreationTimestamp(l.GetCreationTimestamp())
			u.SetDeletionTimestamp(l.GetDeletionTimestamp())
			u.SetFinalizers(l.GetFinalizers())
			out = append(out, u)
			changes = append(changes, PolicyChange{Name: l.GetName(), Change: "changed"})
		case prune && l.GetDeletionTimestamp() == nil:
			u := l.DeepCopy()
			u.SetDeletionTimestamp(&metav1.Time{Time: now})
			out = append(out, u)
			changes = append(changes, PolicyChange{Name: l.GetName(), Change: "deleted"})
		default:
			out = append(out, l)
		}
		delete(byName, l.GetName())
	}
	for _, u := range proposed {
		if _, ok := byName[u.GetName()]; !ok {
			continue
		}
		n := u.DeepCopy()
		n.SetUID(types.UID("proposed-" + u.GetName()))
		n.SetGeneration(1)
		n.SetCreationTimestamp(metav1.Time{Time: now})
		n.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("CleanupPolicy"))
		out = append(out, n)
		changes = append(changes, PolicyChange{Name: u.GetName(), Change: "added"})
	}
	slices.SortFunc(changes, func(a, b PolicyChange) int { return strings.Compare(a.Name, b.Name) })
	return out, changes
}

// sameSpec says whether two CleanupPolicy specs are the same as the API
// server holds them, whatever their source: a file decodes its numbers as
// float64, the API server's JSON as int64, a snapshot as float64 again.
// Both are compared typed, as the operator reads them: a count is a
// count, a duration a duration (1h is 60m), and a field the CRD defaults
// that one leaves out counts as its default. A spec that does not decode
// (one stored before the schema refused it) is compared as JSON, which
// writes an integer alike whatever its Go type. The data of a Secret among
// the signal manifests is not compared: the hub is read without it (a
// snapshot never holds a Secret's data), so neither side's counts.
func sameSpec(live, proposed any) bool {
	live, proposed = runtime.DeepCopyJSONValue(live), runtime.DeepCopyJSONValue(proposed)
	redactSecrets(live)
	redactSecrets(proposed)
	l, lerr := typedSpec(live)
	p, perr := typedSpec(proposed)
	if lerr != nil || perr != nil {
		lraw, lerr := json.Marshal(live)
		praw, perr := json.Marshal(proposed)
		return lerr == nil && perr == nil && bytes.Equal(lraw, praw)
	}
	return equality.Semantic.DeepEqual(withDefaults(l), withDefaults(p))
}

// typedSpec decodes a spec through JSON as the API server and the typed
// client do: field names match case-sensitively, unknown ones are dropped.
func typedSpec(spec any) (*v1alpha1.CleanupPolicySpec, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.CleanupPolicySpec{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}

// withDefaults fills in the defaults of the CleanupPolicy CRD (its
// `default:` values), so that a spec that leaves one out compares equal to
// one the API server defaulted, even when the hub's CRD could not be read
// to default the proposed policies with.
func withDefaults(s *v1alpha1.CleanupPolicySpec) *v1alpha1.CleanupPolicySpec {
	if s.RemoveStrategy.Timeout == nil {
		s.RemoveStrategy.Timeout = &metav1.Duration{Duration: decision.DefaultTimeout}
	}
	if s.DeletionSignal != nil && s.DeletionSignal.WorkName == "" {
		s.DeletionSignal.WorkName = defaultSignalWorkName
	}
	if s.Prune != nil && s.Prune.Default == "" {
		s.Prune.Default = v1alpha1.PruneNone
	}
	return s
}

// defaultSignalWorkName is the CRD's default of spec.deletionSignal.workName.
const defaultSignalWorkName = "cleanup-signal"
