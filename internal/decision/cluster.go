package decision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/cel"
)

// Match is one policy's selector evaluated on one cluster.
type Match struct {
	Matched bool
	// Err is the run-time error of the selector; Matched is then false and
	// the cluster must be held, not released, by the policies it might match.
	Err error
}

// Selection is what the selectors of the ranked policies say of one
// cluster. It knows nothing of the pin of a deleting cluster or of invalid
// policies: Resolve, which takes those into account, decides who governs.
type Selection struct {
	// Governor is the first policy whose selector is true; nil if none is,
	// or if a selector ranked before it failed (see Errors).
	Governor *cel.Policy
	// Matched are the policies whose selector is true, Governor first.
	Matched []*cel.Policy
	// Errors are the policies whose selector failed on this cluster. While
	// any policy that could outrank the governor failed, nobody governs.
	Errors map[*cel.Policy]error
}

// Ranked sorts policies by precedence: highest priority first; of equal
// priority, one that names clusters (a clusterSelector) before a catch-all,
// so that a catch-all never takes the clusters a selector names because of
// its name; then lowest name.
func Ranked(policies []*cel.Policy) []*cel.Policy {
	out := slices.Clone(policies)
	slices.SortFunc(out, Precedence)
	return out
}

// Precedence compares two policies as Ranked orders them: negative when a
// governs before b.
func Precedence(a, b *cel.Policy) int {
	return cmp.Or(cmp.Compare(b.Spec.Priority, a.Spec.Priority),
		cmp.Compare(boolRank(a.ClusterSelector != nil), boolRank(b.ClusterSelector != nil)),
		cmp.Compare(a.Name, b.Name))
}

// Tied says whether a and b rank by their names alone: the same priority,
// and each with a selector or neither.
func Tied(a, b *cel.Policy) bool {
	return a.Spec.Priority == b.Spec.Priority && (a.ClusterSelector != nil) == (b.ClusterSelector != nil)
}

// Governance evaluates selectors and remembers each result until the policy
// generation or the cluster's resourceVersion changes, so that a fleet is
// evaluated once per change, not once per reconcile. It is safe for
// concurrent use.
type Governance struct {
	mu   sync.Mutex
	memo map[memoKey]memoEntry
	// evaluations counts the selector evaluations run (memo misses).
	evaluations int64
}

type memoKey struct {
	policy     types.UID
	generation int64
	cluster    types.UID
}

type memoEntry struct {
	resourceVersion string
	match           Match
}

// NewGovernance returns an empty Governance.
func NewGovernance() *Governance {
	return &Governance{memo: map[memoKey]memoEntry{}}
}

// Evaluations is the number of selector evaluations run so far.
func (g *Governance) Evaluations() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.evaluations
}

// Match evaluates p's selector on cluster, or returns the remembered result.
func (g *Governance) Match(ctx context.Context, budget *cel.Budget, p *cel.Policy, cluster *unstructured.Unstructured) Match {
	key := memoKey{policy: p.UID, generation: p.Generation, cluster: cluster.GetUID()}
	rv := cluster.GetResourceVersion()
	g.mu.Lock()
	if e, ok := g.memo[key]; ok && e.resourceVersion == rv {
		g.mu.Unlock()
		return e.match
	}
	g.evaluations++
	g.mu.Unlock()

	m := Match{Matched: true}
	if p.ClusterSelector != nil {
		m.Matched, m.Err = p.ClusterSelector.Bool(p.Bind(ctx, budget, cluster.Object))
	}
	if m.Err != nil {
		m.Matched = false
		if cel.Transient(m.Err) {
			// Not a property of the cluster: do not remember it.
			return m
		}
	}
	g.mu.Lock()
	g.memo[key] = memoEntry{resourceVersion: rv, match: m}
	g.mu.Unlock()
	return m
}

// Select evaluates the selectors of the ranked policies on cluster: the
// governor is the first whose selector is true, unless a policy ranked
// before it failed, in which case none is until the failure is resolved.
func (g *Governance) Select(ctx context.Context, budget *cel.Budget, ranked []*cel.Policy, cluster *unstructured.Unstructured) Selection {
	var r Selection
	blocked := false
	for _, p := range ranked {
		m := g.Match(ctx, budget, p, cluster)
		switch {
		case m.Err != nil:
			if r.Errors == nil {
				r.Errors = map[*cel.Policy]error{}
			}
			r.Errors[p] = m.Err
			if r.Governor == nil {
				blocked = true
			}
		case m.Matched:
			r.Matched = append(r.Matched, p)
			if r.Governor == nil && !blocked {
				r.Governor = p
			}
		}
	}
	return r
}

// Why says why the governor governs: the policies that matched, and what
// ranks the governor before the next of them. Empty when none governs.
func (s Selection) Why() string {
	if s.Governor == nil {
		return ""
	}
	names := make([]string, len(s.Matched))
	for i, p := range s.Matched {
		names[i] = p.Name
	}
	why := "matched by " + strings.Join(names, ", ") + "; "
	if len(s.Matched) < 2 {
		return why + "the only one"
	}
	gov, next := s.Governor, s.Matched[1]
	switch {
	case gov.Spec.Priority > next.Spec.Priority:
		return why + fmt.Sprintf("%s has the highest priority (%d; %s has %d)", gov.Name, gov.Spec.Priority, next.Name, next.Spec.Priority)
	case !Tied(gov, next):
		return why + fmt.Sprintf("%s names clusters with its selector, %s of the same priority is a catch-all", gov.Name, next.Name)
	}
	return why + fmt.Sprintf("%s and %s tie on priority %d, and %s has the lower name: give one a higher priority", gov.Name, next.Name, gov.Spec.Priority, gov.Name)
}

// Forget drops the remembered results that keep does not keep, such as those
// of deleted clusters and old policy generations.
func (g *Governance) Forget(keep func(policy types.UID, generation int64, cluster types.UID) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.memo {
		if !keep(k.policy, k.generation, k.cluster) {
			delete(g.memo, k)
		}
	}
}

// Governed is the decision context of one reconcile: the cluster, the
// policy that governs it, or why no decision may be taken now.
type Governed struct {
	// Cluster is the ManagedCluster; nil when there is none of that name.
	Cluster *unstructured.Unstructured
	// Policy governs the cluster; nil when none does.
	Policy *cel.Policy
	// Held, when set, says why no decision may be taken now: a policy that
	// could govern the cluster failed, or the policy that governs it does
	// not compile. The object is held as it is and the hold reported.
	Held error
	// Budget is this reconcile's CEL budget.
	Budget *cel.Budget
	// Activation binds the cluster for the policy's expressions.
	Activation *cel.Activation
	// Suspended, when set, says why the operator makes no write for the
	// cluster and what it governs: a suspended policy, or the cluster's
	// paused annotation. The decisions may still be computed (a preview).
	Suspended string
	// Selection is what the selectors say of the cluster; nil when they
	// were not evaluated (no cluster, a held pin, or the pin of a deleting
	// cluster, which the selectors do not decide).
	Selection *Selection
}

// Input is what governance reads of the API server for one cluster.
type Input struct {
	// Cluster is the ManagedCluster; nil when the namespace names none.
	Cluster *unstructured.Unstructured
	// Standalone asks, when Cluster is nil, for the standalone rule: the
	// object is governed by the highest-priority policy with no
	// clusterSelector, with `cluster` null. Otherwise nothing governs it.
	Standalone bool
	// Ranked are the valid policies not being deleted, by precedence.
	Ranked []*cel.Policy
	// Invalid are the errors of the policies not being deleted that do not
	// compile or decode, by name.
	Invalid map[string]error
	// Pinned is the policy named by a deleting cluster's governing-policy
	// annotation, even while it is being deleted; nil when there is none of
	// that name or it does not compile (PinnedErr).
	Pinned    *cel.Policy
	PinnedErr error
	// Suspended are the names of the policies stored with spec.suspend
	// true, read raw: valid or not, being deleted or not. A cluster whose
	// governing-policy annotation names one is suspended.
	Suspended map[string]bool
}

// Pin is the policy a cluster names in its governing-policy annotation.
func Pin(cluster *unstructured.Unstructured) string {
	if cluster == nil {
		return ""
	}
	return PinOf(cluster)
}

// PinOf is the governing-policy annotation of any object (Pin of a cluster
// that is there), read without a copy of its annotations.
func PinOf(o interface{ GetAnnotations() map[string]string }) string {
	pin, _ := Annotation(o, v1alpha1.GoverningPolicyAnnotation)
	return pin
}

// Pinned says whether the cluster's governing policy is fixed by its
// annotation rather than by the selectors: a teardown is finished by the
// policy that started it.
func Pinned(cluster *unstructured.Unstructured) bool {
	return cluster != nil && cluster.GetDeletionTimestamp() != nil && Pin(cluster) != ""
}

// Resolve decides which policy governs in.Cluster. A cluster being deleted
// stays with the policy named in its annotation while that policy exists,
// even while it is being deleted (its in-use finalizer keeps it until the
// teardown ends). A cluster whose named policy does not compile is held,
// not released. Otherwise the selectors decide (see Select); a failed
// selector of a policy ranked before the governor holds the cluster.
//
// Suspended is set when the cluster is paused, its governor suspended, or
// the policy its annotation names suspended (that policy keeps it).
func (g *Governance) Resolve(ctx context.Context, budget *cel.Budget, in Input) *Governed {
	gov := g.resolve(ctx, budget, in)
	gov.Suspended = suspension(in.Cluster, gov.Policy, in.suspended())
	return gov
}

// suspended are the names of the suspended policies: in.Suspended, and
// the ranked or pinned policies that say so.
func (in Input) suspended() map[string]bool {
	out := make(map[string]bool, len(in.Suspended))
	for name, s := range in.Suspended {
		out[name] = s
	}
	for _, p := range in.Ranked {
		if p.Spec.Suspend {
			out[p.Name] = true
		}
	}
	if in.Pinned != nil && in.Pinned.Spec.Suspend {
		out[in.Pinned.Name] = true
	}
	return out
}

func (g *Governance) resolve(ctx context.Context, budget *cel.Budget, in Input) *Governed {
	gov := &Governed{Cluster: in.Cluster, Budget: budget}
	if in.Cluster == nil {
		if p := Standalone(in.Ranked); in.Standalone && p != nil {
			gov.Policy = p
			gov.Activation = p.Bind(ctx, budget, nil)
		}
		return gov
	}
	pin := Pin(in.Cluster)
	if Pinned(in.Cluster) {
		switch {
		case in.PinnedErr != nil:
			gov.Held = &InvalidPolicyError{Name: pin, Err: in.PinnedErr}
			return gov
		case in.Pinned != nil:
			gov.Policy = in.Pinned
			gov.Activation = in.Pinned.Bind(ctx, budget, in.Cluster.Object)
			return gov
		}
	}
	if err, broken := in.Invalid[pin]; broken && pin != "" {
		gov.Held = &InvalidPolicyError{Name: pin, Err: err}
		return gov
	}
	sel := g.Select(ctx, budget, in.Ranked, in.Cluster)
	gov.Selection = &sel
	if sel.Governor == nil && len(sel.Errors) > 0 {
		msgs := make([]string, 0, len(sel.Errors))
		for p, err := range sel.Errors {
			msgs = append(msgs, fmt.Sprintf("CleanupPolicy %s: %v", p.Name, err))
		}
		slices.Sort(msgs)
		gov.Held = errors.New(strings.Join(msgs, "; "))
		return gov
	}
	if sel.Governor != nil {
		gov.Policy = sel.Governor
		gov.Activation = sel.Governor.Bind(ctx, budget, in.Cluster.Object)
	}
	return gov
}

// Standalone is the policy that governs objects in namespaces that name no
// ManagedCluster: the first of the ranked policies with no clusterSelector.
func Standalone(ranked []*cel.Policy) *cel.Policy {
	for _, p := range ranked {
		if p.ClusterSelector == nil {
			return p
		}
	}
	return nil
}

// InvalidPolicyError says the policy that governs a cluster does not compile.
type InvalidPolicyError struct {
	Name string
	Err  error
}

func (e *InvalidPolicyError) Error() string {
	return fmt.Sprintf("CleanupPolicy %s, which governs this cluster, does not compile: %v", e.Name, e.Err)
}

func (e *InvalidPolicyError) Unwrap() error { return e.Err }

// Well-known resources of a cluster namespace.
var (
	ManagedClusterAddOns = schema.GroupVersionResource{Group: "addon.open-cluster-management.io", Version: "v1alpha1", Resource: "managedclusteraddons"}
	ManifestWorks        = schema.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
)

// DefaultTimeout applies when a policy sets no removeStrategy.timeout.
const DefaultTimeout = 30 * time.Minute

// Stage is one step of a cluster's cleanup: the objects of one resource,
// optionally filtered.
type Stage struct {
	Name string
	GVR  schema.GroupVersionResource
	When *cel.Expression // nil: every object not taken by an earlier stage
	// Namespaces are where the stage finds its objects outside the
	// cluster namespace; ClusterScoped says its resource is
	// cluster-scoped. Neither: the cluster namespace.
	Namespaces    []string
	ClusterScoped bool
}

// Outside says whether the stage finds its objects outside the cluster
// namespace.
func (s Stage) Outside() bool { return len(s.Namespaces) > 0 || s.ClusterScoped }

// Stages returns the policy's stages, or the default ones: add-ons, then
// ManifestWorks.
func Stages(p *cel.Policy) []Stage {
	if len(p.Spec.DeletionStages) == 0 {
		return []Stage{
			{Name: "addons", GVR: ManagedClusterAddOns},
			{Name: "manifestworks", GVR: ManifestWorks},
		}
	}
	out := make([]Stage, len(p.Spec.DeletionStages))
	for i, s := range p.Spec.DeletionStages {
		out[i] = Stage{Name: s.Name, GVR: gvr(s.GroupVersionResource), When: p.StageWhen[i],
			Namespaces: s.Namespaces, ClusterScoped: s.ClusterScoped}
	}
	return out
}

// Monitored is one monitored resource of a policy.
type Monitored struct {
	GVR  schema.GroupVersionResource
	When *cel.Expression
}

// MonitoredResources returns the resources that gate a cluster's cleanup.
func MonitoredResources(p *cel.Policy) []Monitored {
	out := make([]Monitored, len(p.Spec.MonitoredResources))
	for i, m := range p.Spec.MonitoredResources {
		out[i] = Monitored{GVR: gvr(m.GroupVersionResource), When: p.MonitoredWhen[i]}
	}
	return out
}

// Resources lists every resource a cluster's cleanup reads in the cluster
// namespace: monitored ones and stages, without duplicates. Stages outside
// it are read at their Places.
func Resources(p *cel.Policy) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	add := func(g schema.GroupVersionResource) {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	for _, m := range MonitoredResources(p) {
		add(m.GVR)
	}
	for _, s := range Stages(p) {
		if !s.Outside() {
			add(s.GVR)
		}
	}
	return out
}

func gvr(g v1alpha1.GroupVersionResource) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: g.Group, Version: g.Version, Resource: g.Resource}
}

// Strategy is the remove strategy for the cluster bound in a: the first rule
// whose `when` is true, else the default.
func Strategy(p *cel.Policy, a *cel.Activation) (v1alpha1.RemoveStrategyType, error) {
	for i, rule := range p.Spec.RemoveStrategy.Rules {
		ok, err := p.StrategyRules[i].Bool(a)
		if err != nil {
			return "", err
		}
		if ok {
			return rule.Strategy, nil
		}
	}
	return p.Spec.RemoveStrategy.Default, nil
}

// Timeout is how long a cleanup may take before the strategy's timeout rules apply.
func Timeout(p *cel.Policy) time.Duration {
	if t := p.Spec.RemoveStrategy.Timeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return DefaultTimeout
}

// SignalWorkName is the name of the deletion-signal ManifestWork, or "" when
// the policy declares no signal.
func SignalWorkName(p *cel.Policy) string {
	if p.Spec.DeletionSignal == nil {
		return ""
	}
	if p.Spec.DeletionSignal.WorkName == "" {
		return "cleanup-signal"
	}
	return p.Spec.DeletionSignal.WorkName
}

// KeepNamespace says whether the cluster namespace stays after the cleanup.
func KeepNamespace(p *cel.Policy, a *cel.Activation, namespace map[string]any) (bool, error) {
	if p.KeepNamespace == nil {
		return false, nil
	}
	return p.KeepNamespace.Bool(a.With(cel.VarNamespace, namespace))
}

// Object is what the decisions need of an object in the cluster namespace:
// its metadata, as the operator's metadata-only watches see it.
type Object struct {
	GVR  schema.GroupVersionResource
	Meta *metav1.PartialObjectMetadata
	// Value is the metadata as CEL sees it, as `object`; nil: made from
	// Meta when a filter reads it (most policies have none).
	Value map[string]any
	// Outside says the object was read outside the cluster namespace, for
	// a stage that names namespaces or is clusterScoped.
	Outside bool
}

// CELValue is the object as a `when` filter reads it.
func (o Object) CELValue() (map[string]any, error) {
	if o.Value != nil {
		return o.Value, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(o.Meta)
}

// Key names an object for messages: resource/name, or
// resource/namespace/name outside the cluster namespace.
func (o Object) Key() string {
	if o.Outside && o.Meta.Namespace != "" {
		return o.GVR.Resource + "/" + o.Meta.Namespace + "/" + o.Meta.Name
	}
	return o.GVR.Resource + "/" + o.Meta.Name
}

// Gate returns the monitored objects that hold the cleanup.
func Gate(p *cel.Policy, a *cel.Activation, byGVR map[schema.GroupVersionResource][]Object) ([]Object, error) {
	var holding []Object
	for _, m := range MonitoredResources(p) {
		for _, o := range byGVR[m.GVR] {
			ok := true
			if m.When != nil {
				value, err := o.CELValue()
				if err != nil {
					return nil, err
				}
				if ok, err = m.When.Bool(a.With(cel.VarObject, value)); err != nil {
					return nil, err
				}
			}
			if ok {
				holding = append(holding, o)
			}
		}
	}
	return holding, nil
}

// AssignStages sorts the objects into the stages: each object belongs to the
// first stage of its resource whose filter is true. A stage in the cluster
// namespace reads byGVR, one outside it the objects of its Places in
// outside. Objects named in skip (the deletion-signal work) belong to none.
// Within a stage, objects are in deletion order (see DeletionOrder).
func AssignStages(p *cel.Policy, a *cel.Activation, stages []Stage, byGVR map[schema.GroupVersionResource][]Object,
	outside map[Place][]Object, skip func(Object) bool) ([][]Object, error) {
	out := make([][]Object, len(stages))
	taken := map[*metav1.PartialObjectMetadata]bool{}
	for i, s := range stages {
		objs := byGVR[s.GVR]
		if s.Outside() {
			objs = nil
			for _, pl := range s.Places() {
				objs = append(objs, outside[pl]...)
			}
		}
		for _, o := range objs {
			if taken[o.Meta] || (skip != nil && skip(o)) {
				continue
			}
			ok := true
			if s.When != nil {
				value, err := o.CELValue()
				if err != nil {
					return nil, err
				}
				if ok, err = s.When.Bool(a.With(cel.VarObject, value)); err != nil {
					return nil, err
				}
			}
			if ok {
				taken[o.Meta] = true
				out[i] = append(out[i], o)
			}
		}
		slices.SortStableFunc(out[i], func(x, y Object) int {
			if c := cmp.Compare(DeletionOrder(x.Meta), DeletionOrder(y.Meta)); c != 0 {
				return c
			}
			return cmp.Compare(x.Meta.Name, y.Meta.Name)
		})
	}
	return out, nil
}

// DeletionOrder ranks an object by OCM's cleanup-priority annotation, as OCM
// defines it: objects without the annotation first (-2), then those with a
// value outside 0..100 (-1), then by value, lowest first.
func DeletionOrder(o metav1.Object) int {
	v, ok := o.GetAnnotations()[clusterv1.CleanupPriorityAnnotationKey]
	if !ok {
		return -2
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 100 {
		return -1
	}
	return n
}

// FirstGroup returns the leading objects of a stage that share the lowest
// deletion order: they are deleted together, and the next group waits until
// they are gone.
func FirstGroup(stage []Object) []Object {
	if len(stage) == 0 {
		return nil
	}
	first := DeletionOrder(stage[0].Meta)
	n := 1
	for n < len(stage) && DeletionOrder(stage[n].Meta) == first {
		n++
	}
	return stage[:n]
}

// Place is where a stage outside the cluster namespace finds its objects:
// a resource in one namespace, or a cluster-scoped resource (Namespace "").
type Place struct {
	GVR       schema.GroupVersionResource
	Namespace string
}

func (p Place) String() string {
	if p.Namespace == "" {
		return ResourceName(p.GVR) + " (cluster-scoped)"
	}
	return ResourceName(p.GVR) + " in namespace " + p.Namespace
}

// Places are where the stage finds its objects outside the cluster
// namespace; none for a stage in it.
func (s Stage) Places() []Place {
	if s.ClusterScoped {
		return []Place{{GVR: s.GVR}}
	}
	out := make([]Place, len(s.Namespaces))
	for i, ns := range s.Namespaces {
		out[i] = Place{GVR: s.GVR, Namespace: ns}
	}
	return out
}

// Places lists every place outside the cluster namespace the policy's
// stages read, without duplicates.
func Places(p *cel.Policy) []Place {
	var out []Place
	for _, s := range Stages(p) {
		for _, pl := range s.Places() {
			if !slices.Contains(out, pl) {
				out = append(out, pl)
			}
		}
	}
	return out
}

// where says, for messages, where an outside stage reads; "" in the
// cluster namespace.
func (s Stage) where() string {
	switch {
	case s.ClusterScoped:
		return " (cluster-scoped)"
	case len(s.Namespaces) > 0:
		return fmt.Sprintf(" in namespace(s) %v", s.Namespaces)
	}
	return ""
}

// ReadResources lists every resource a cluster's cleanup reads, in the
// cluster namespace or at its stages' places, without duplicates.
func ReadResources(p *cel.Policy) []schema.GroupVersionResource {
	out := Resources(p)
	for _, pl := range Places(p) {
		if !slices.Contains(out, pl.GVR) {
			out = append(out, pl.GVR)
		}
	}
	return out
}

// BudgetOf is the budget of a policy's spec.blastRadius, each unset field
// from the operator's default, for a policy governing governed clusters.
func BudgetOf(spec *v1alpha1.BlastRadius, def v1alpha1.BlastRadius, governed int) Budget {
	b := Budget{MaxTeardowns: -1, Window: v1alpha1.DefaultBlastRadiusWindow.Duration, AfterWindow: v1alpha1.AfterWindowHold}
	pick := def
	if spec != nil {
		pick = *spec
		if pick.MaxTeardowns == nil {
			pick.MaxTeardowns = def.MaxTeardowns
		}
		if pick.Window == nil {
			pick.Window = def.Window
		}
		if pick.MaxConcurrent == nil {
			pick.MaxConcurrent = def.MaxConcurrent
		}
		if pick.AfterWindow == "" {
			pick.AfterWindow = def.AfterWindow
		}
	}
	if m := pick.MaxTeardowns; m != nil {
		if m.Type == intstr.String {
			b.Share = m.StrVal
		}
		// A share rounds down: when in doubt, hold.
		n, err := intstr.GetScaledValueFromIntOrPercent(m, governed, false)
		if err != nil || n < 0 {
			n = 0
		}
		b.MaxTeardowns = n
	}
	if pick.Window != nil && pick.Window.Duration > 0 {
		b.Window = pick.Window.Duration
	}
	if pick.MaxConcurrent != nil && *pick.MaxConcurrent > 0 {
		b.MaxConcurrent = int(*pick.MaxConcurrent)
	}
	if pick.AfterWindow != "" {
		b.AfterWindow = pick.AfterWindow
	}
	return b
}
