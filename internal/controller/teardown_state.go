package controller

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// teardownState is all this process keeps in memory of one cluster's
// teardown: what its own writes did, so that a cache that has not caught
// up yet does not cause the same write twice; the progress last written;
// the record as last written; whether the teardown was seen suspended. It
// is made at the teardown's first step and dropped once, however the
// teardown ends (teardowns.end, drop, gone). Durable facts live on the
// cluster and in the record, read back by the snapshot: after a restart a
// teardown starts with an empty state and loses nothing.
type teardownState struct {
	mu sync.Mutex
	// stamps are the generations of works this process gave a
	// deleteOption, so that a cache that has not caught up with the stamp
	// is not taken for a work the agent applied it to; stampCount counts
	// them per work, to stop a write war.
	stamps     map[types.UID]int64
	stampCount map[types.UID]int
	deleted    sets.Set[types.UID]
	forced     sets.Set[types.UID]
	// labelledOver is the namespace as read when this process last
	// labelled or unlabelled it (labelKey), which a stale cache still shows.
	labelledOver string
	// suspended: seen paused or under a suspended policy since its resume
	// was last reported.
	suspended bool
	// progress is the step last written on the cluster, and when.
	progress *progressMark
	// record is the teardown record as last written or read; nil until
	// read once.
	record *openRecord
	// dryRun is the fingerprint of the dry-run record written.
	dryRun string
	// closedAt is the resourceVersions the cluster namespace and the
	// admission policy and binding had, read live, when the API server
	// refused a dry-run create in the namespace: while none of them has
	// been written since, it is still closed (namespaceClosed).
	closedAt string
	// noted: this process wrote (or tried to write) the cluster's forced
	// count or unconfirmed orphans, which the outcome is read from: the
	// outcome is then written with its check that the cluster as read is
	// current, even on a cluster its finalizer's removal deletes.
	noted bool
	// awaited is what the last reconcile's step only waits for to be gone
	// (teardown_await.go), and seenGone the works seen deleted.
	awaited  awaited
	seenGone sets.Set[types.UID]
}

// closedSince says whether the namespace and the admission objects, at
// resourceVersions rv (never ""), are as when the API server was seen to
// close it.
func (st *teardownState) closedSince(rv string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closedAt == rv
}

// closed keeps the resourceVersions when the namespace was seen closed.
func (st *teardownState) closed(rv string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closedAt = rv
}

// memory is what the plan reads of this process's writes.
func (st *teardownState) memory() decision.Memory {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := decision.Memory{Stamped: map[types.UID]int64{}, Restamps: map[types.UID]int{},
		Deleted: map[types.UID]bool{}, Forced: map[types.UID]bool{}, Resumed: st.suspended}
	for uid, g := range st.stamps {
		m.Stamped[uid] = g
		m.Restamps[uid] = max(st.stampCount[uid]-1, 0)
	}
	for uid := range st.deleted {
		m.Deleted[uid] = true
	}
	for uid := range st.forced {
		m.Forced[uid] = true
	}
	return m
}

// stamped is the generation this process stamped on a work, if any.
func (st *teardownState) stamped(uid types.UID) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stamps[uid]
}

func (st *teardownState) stamp(uid types.UID, generation int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stamps[uid] = generation
	st.stampCount[uid]++
}

// deletedAll remembers the objects the executor deleted.
func (st *teardownState) deletedAll(uids sets.Set[types.UID]) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.deleted = st.deleted.Union(uids)
}

// forcedAll remembers the objects whose finalizer the executor removed.
func (st *teardownState) forcedAll(uids sets.Set[types.UID]) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.forced = st.forced.Union(uids)
}

// sawSuspended marks the teardown seen paused or suspended.
func (st *teardownState) sawSuspended() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.suspended = true
}

// resumeReported clears the suspended mark: the resume is reported, or
// there is none to report.
func (st *teardownState) resumeReported() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.suspended = false
}

// teardowns are the states of the teardowns this process runs, by cluster
// UID, and the clusters whose finalizer it removed, until they are gone
// (a cache that has not caught up yet still shows them deleting).
type teardowns struct {
	mu       sync.Mutex
	states   map[types.UID]*teardownState
	names    map[types.UID]string
	finished map[types.UID]string
	// retiring are the stamps on signal works retired from clusters not
	// being deleted, by cluster name: the plan of a teardown that begins
	// meanwhile reads them too.
	retiring map[string]map[types.UID]int64
	// outside are the namespaces ("" for cluster-scoped objects) outside
	// its own where a teardown waits for objects to go, by cluster name:
	// the events there name no cluster.
	outside map[string][]string
	// notBegun are the teardowns that have not made their first write,
	// the ones a blast radius may hold, by cluster name, with the policy
	// of their last report ("" before it): the events of the policy's
	// other clusters wake them (teardown_wake.go).
	notBegun map[string]string
}

func newTeardowns() *teardowns {
	return &teardowns{states: map[types.UID]*teardownState{}, names: map[types.UID]string{},
		finished: map[types.UID]string{}, retiring: map[string]map[types.UID]int64{}, outside: map[string][]string{},
		notBegun: map[string]string{}}
}

// waitOutside remembers where outside its namespace the cluster's
// teardown waits; none: it waits there no more.
func (t *teardowns) waitOutside(cluster string, namespaces []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(namespaces) == 0 {
		delete(t.outside, cluster)
		return
	}
	t.outside[cluster] = namespaces
}

// waitingIn are the clusters whose teardowns wait for objects in the
// namespace ("" for cluster-scoped objects).
func (t *teardowns) waitingIn(namespace string) []reconcile.Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	var reqs []reconcile.Request
	for cluster, namespaces := range t.outside {
		if slices.Contains(namespaces, namespace) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: cluster}})
		}
	}
	return reqs
}

// of returns the state of the cluster's teardown, made at its first step.
func (t *teardowns) of(cluster string, uid types.UID) *teardownState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.states[uid]
	if st == nil {
		st = &teardownState{stamps: map[types.UID]int64{}, stampCount: map[types.UID]int{},
			deleted: sets.New[types.UID](), forced: sets.New[types.UID]()}
		t.states[uid], t.names[uid] = st, cluster
		t.notBegun[cluster] = ""
	}
	return st
}

// reported keeps whether the cluster's teardown has begun, by the report
// of its last step under the policy.
func (t *teardowns) reported(cluster, policy string, begun bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if begun {
		delete(t.notBegun, cluster)
		return
	}
	if _, ok := t.notBegun[cluster]; ok || policy != "" {
		t.notBegun[cluster] = policy
	}
}

// notBegunOf are the teardowns not begun of the policy, and those not
// reported yet, but the cluster's own.
func (t *teardowns) notBegunOf(policy, except string) []reconcile.Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	var reqs []reconcile.Request
	for cluster, p := range t.notBegun {
		if cluster != except && (p == "" || p == policy) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: cluster}})
		}
	}
	return reqs
}

// peek returns the state of the cluster's teardown, or nil: it makes none.
func (t *teardowns) peek(uid types.UID) *teardownState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.states[uid]
}

// memory is what the plan of the cluster's teardown reads of this
// process's writes, the stamps of signal works retired included.
func (t *teardowns) memory(cluster string, uid types.UID) decision.Memory {
	m := t.of(cluster, uid).memory()
	t.mu.Lock()
	defer t.mu.Unlock()
	for w, g := range t.retiring[cluster] {
		if _, ok := m.Stamped[w]; !ok {
			m.Stamped[w] = g
		}
	}
	return m
}

// end drops the state of a teardown the operator finished by removing its
// finalizer, and remembers the cluster as finished until it is gone.
func (t *teardowns) end(cluster string, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocked(uid)
	if len(t.finished) >= maxFinished {
		clear(t.finished)
	}
	t.finished[uid] = cluster
}

// drop drops the state of a teardown that ended otherwise: its finalizer
// removed by hand, or the cluster not being deleted (any more).
func (t *teardowns) drop(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocked(uid)
}

func (t *teardowns) dropLocked(uid types.UID) {
	if name, ok := t.names[uid]; ok {
		delete(t.outside, name)
		delete(t.notBegun, name)
	}
	delete(t.states, uid)
	delete(t.names, uid)
}

// gone drops everything kept of a cluster that is gone, under any UID.
func (t *teardowns) gone(cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, name := range t.names {
		if name == cluster {
			t.dropLocked(uid)
		}
	}
	for uid, name := range t.finished {
		if name == cluster {
			delete(t.finished, uid)
		}
	}
	delete(t.retiring, cluster)
	delete(t.outside, cluster)
	delete(t.notBegun, cluster)
}

// replaced drops what is kept of the teardowns of a cluster of that name
// under another UID than uid: the cluster was recreated under its name
// before its delete was seen (the queue merges a cluster's events by
// name), so Gone never comes for it.
func (t *teardowns) replaced(cluster string, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for old, name := range t.names {
		if name == cluster && old != uid {
			t.dropLocked(old)
		}
	}
	for old, name := range t.finished {
		if name == cluster && old != uid {
			delete(t.finished, old)
		}
	}
}

// maxFinished bounds the finished clusters remembered, should their
// deletes be missed; the cache has long caught up with the oldest.
const maxFinished = 10000

// isFinished says whether this process removed the cluster's finalizer.
func (t *teardowns) isFinished(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.finished[uid]
	return ok
}

// retireStamp remembers a stamp on a signal work being retired.
func (t *teardowns) retireStamp(cluster string, uid types.UID, generation int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.retiring[cluster] == nil {
		t.retiring[cluster] = map[types.UID]int64{}
	}
	t.retiring[cluster][uid] = generation
}

// retireStamped is the generation this process stamped on a signal work
// being retired, if any.
func (t *teardowns) retireStamped(cluster string, uid types.UID) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.retiring[cluster][uid]
}

// retired forgets the stamp of a signal work deleted.
func (t *teardowns) retired(cluster string, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.retiring[cluster], uid)
	if len(t.retiring[cluster]) == 0 {
		delete(t.retiring, cluster)
	}
}

// held counts the clusters this process keeps anything of.
func (t *teardowns) held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.states) + len(t.finished) + len(t.retiring)
}

// keeps says whether anything is kept of the cluster.
func (t *teardowns) keeps(cluster string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range t.names {
		if name == cluster {
			return true
		}
	}
	for _, name := range t.finished {
		if name == cluster {
			return true
		}
	}
	return t.retiring[cluster] != nil
}

// Kept lists the clusters among names that this process still keeps
// anything of in memory: a teardown's state, a finished teardown not yet
// gone, the stamp of a signal work being retired, a cluster's metric
// series.
func (a *ClusterTeardown) Kept(names ...string) []string {
	var out []string
	for _, name := range names {
		if a.teardowns.keeps(name) || a.Metrics.keeps(name) || blastRadiusKeeps(name) {
			out = append(out, name)
		}
	}
	return out
}
