package decision

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

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
