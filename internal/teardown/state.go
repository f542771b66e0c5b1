package teardown

import (
	"slices"
	"sync"
	"time"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
	"github.com/fleetops-dev/cleanup-operator/internal/metrics"
	"github.com/fleetops-dev/cleanup-operator/internal/record"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// teardownState is all this process keeps in memory of one cluster's
// teardown: what its own writes did, so that a cache that has not caught
// up yet does not cause the same write twice; the progress last written;
// the record as last written; whether the teardown was seen suspended. It
// is made at the teardown's first step and dropped once, however the
// teardown ends (teardowns.endLocked). Durable facts live on the
// cluster and in the record, read back by the snapshot: after a restart a
// teardown starts with an empty state and loses nothing.
type teardownState struct {
	mu sync.Mutex
	// cluster is the cluster's name, which its metric series and wake-ups
	// go by; metrics export them.
	cluster string
	uid     types.UID
	metrics *metrics.Metrics
	// ended: teardowns.endLocked dropped it; an event handler holding it
	// still exports nothing through it.
	ended bool
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
	// record is the teardown record as last written or read.
	record record.Open
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
	// begun: its last report said its first write was made; policy is the
	// policy of that report ("" before it). A teardown not begun is one a
	// blast radius may hold: the events of the policy's other clusters
	// wake it (wakeHeld).
	begun  bool
	policy string
	// outside are the namespaces ("" for cluster-scoped objects) outside
	// its own where it waits for objects to go: the events there name no
	// cluster.
	outside []string
	// series are the cluster's metric series: its step (nil: none yet),
	// the step of its remaining count ("": none), and the policy whose
	// blast radius it is counted held by ("": none).
	series    *metrics.ClusterSeries
	remaining string
	budget    string
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

// Teardowns are the states of the teardowns this process runs, one per
// cluster UID, and the clusters whose finalizer it removed, until they are
// gone (a cache that has not caught up yet still shows them deleting).
// Every way a teardown ends goes through endLocked, which drops its state
// with its metric series.
type Teardowns struct {
	mu      sync.Mutex
	metrics *metrics.Metrics
	states  map[types.UID]*teardownState
	// named is the state of each cluster name: a name has at most one.
	named    map[string]*teardownState
	finished map[types.UID]string
	// waiting and notBegun index the states that wait for objects outside
	// their namespace, and those not begun, which events look up.
	waiting, notBegun sets.Set[types.UID]
	// retiring are the stamps on signal works retired from clusters not
	// being deleted, by cluster name: the plan of a teardown that begins
	// meanwhile reads them too.
	retiring map[string]map[types.UID]int64
}

// NewTeardowns keeps the teardowns' metric series in m (nil: none).
func NewTeardowns(m *metrics.Metrics) *Teardowns {
	return &Teardowns{metrics: m, states: map[types.UID]*teardownState{}, named: map[string]*teardownState{}, finished: map[types.UID]string{},
		retiring: map[string]map[types.UID]int64{}, waiting: sets.New[types.UID](), notBegun: sets.New[types.UID]()}
}

// of returns the state of the cluster's teardown, made at its first step.
// A cluster has one: the state of an earlier cluster of its name (gone and
// recreated before its delete was seen) ends.
func (t *Teardowns) of(cluster string, uid types.UID) *teardownState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.states[uid]
	if st == nil {
		t.replacedLocked(cluster, uid)
		st = &teardownState{cluster: cluster, uid: uid, metrics: t.metrics, stamps: map[types.UID]int64{}, stampCount: map[types.UID]int{},
			deleted: sets.New[types.UID](), forced: sets.New[types.UID]()}
		t.states[uid] = st
		t.named[cluster] = st
		t.notBegun.Insert(uid)
	}
	return st
}

// peek returns the state of the cluster's teardown, or nil: it makes none.
func (t *Teardowns) peek(uid types.UID) *teardownState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.states[uid]
}

// each calls f with each state of uids, under the lock.
func (t *Teardowns) each(uids sets.Set[types.UID], f func(*teardownState)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range uids {
		if st := t.states[uid]; st != nil {
			f(st)
		}
	}
}

// reported keeps what the report r of a teardown's step says
// (teardownState.reported), and indexes the teardown as waiting outside
// its namespace or not begun.
func (t *Teardowns) reported(st *teardownState, mc *unstructured.Unstructured, plan *decision.Plan, r *decision.Report) {
	waits, begun := st.reported(mc, plan, r)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.states[st.uid] != st {
		return // ended meanwhile
	}
	if waits {
		t.waiting.Insert(st.uid)
	} else {
		t.waiting.Delete(st.uid)
	}
	if begun {
		t.notBegun.Delete(st.uid)
	} else {
		t.notBegun.Insert(st.uid)
	}
}

// waitingIn are the clusters whose teardowns wait for objects in the
// namespace ("" for cluster-scoped objects).
func (t *Teardowns) waitingIn(namespace string) []reconcile.Request {
	var reqs []reconcile.Request
	t.each(t.waiting, func(st *teardownState) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if slices.Contains(st.outside, namespace) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: st.cluster}})
		}
	})
	return reqs
}

// notBegunOf are the teardowns not begun of the policy, and those not
// reported yet, but the cluster's own.
func (t *Teardowns) notBegunOf(policy, except string) []reconcile.Request {
	var reqs []reconcile.Request
	t.each(t.notBegun, func(st *teardownState) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if !st.begun && st.cluster != except && (st.policy == "" || st.policy == policy) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: st.cluster}})
		}
	})
	return reqs
}

// memory is what the plan of the cluster's teardown reads of this
// process's writes, the stamps of signal works retired included.
func (t *Teardowns) memory(cluster string, uid types.UID) decision.Memory {
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

// end ends a teardown: the operator finished it by removing its
// finalizer (finished: the cluster is remembered until it is gone), or it
// ended otherwise (its finalizer removed by hand, the cluster not being
// deleted any more).
func (t *Teardowns) end(uid types.UID, finished bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.states[uid]
	t.endLocked(uid)
	if finished && st != nil {
		if len(t.finished) >= maxFinished {
			clear(t.finished)
		}
		t.finished[uid] = st.cluster
	}
}

// endLocked drops a teardown's state and its metric series: the one way
// every teardown ends.
func (t *Teardowns) endLocked(uid types.UID) {
	st := t.states[uid]
	if st == nil {
		return
	}
	delete(t.states, uid)
	if t.named[st.cluster] == st {
		delete(t.named, st.cluster)
	}
	t.waiting.Delete(uid)
	t.notBegun.Delete(uid)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.metrics.Drop(st.cluster, st.series, st.remaining, st.budget)
	st.series, st.remaining, st.budget, st.ended = nil, "", "", true
}

// gone drops everything kept of a cluster that is gone, under any UID.
func (t *Teardowns) gone(cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replacedLocked(cluster, "")
	delete(t.retiring, cluster)
}

// replaced ends the teardowns of a cluster of that name under another UID
// than uid: the cluster was recreated under its name before its delete was
// seen (the queue merges a cluster's events by name), so Gone never comes
// for it.
func (t *Teardowns) replaced(cluster string, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replacedLocked(cluster, uid)
}

func (t *Teardowns) replacedLocked(cluster string, uid types.UID) {
	if st := t.named[cluster]; st != nil && st.uid != uid {
		t.endLocked(st.uid)
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
func (t *Teardowns) isFinished(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.finished[uid]
	return ok
}

// RetireStamp remembers a stamp on a signal work being retired.
func (t *Teardowns) RetireStamp(cluster string, uid types.UID, generation int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.retiring[cluster] == nil {
		t.retiring[cluster] = map[types.UID]int64{}
	}
	t.retiring[cluster][uid] = generation
}

// RetireStamped is the generation this process stamped on a signal work
// being retired, if any.
func (t *Teardowns) RetireStamped(cluster string, uid types.UID) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.retiring[cluster][uid]
}

// Retired forgets the stamp of a signal work deleted.
func (t *Teardowns) Retired(cluster string, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.retiring[cluster], uid)
	if len(t.retiring[cluster]) == 0 {
		delete(t.retiring, cluster)
	}
}

// held counts the clusters this process keeps anything of.
func (t *Teardowns) held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.states) + len(t.finished) + len(t.retiring)
}

// keeps says whether anything is kept of the cluster.
func (t *Teardowns) keeps(cluster string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.named[cluster] != nil {
		return true
	}
	for _, name := range t.finished {
		if name == cluster {
			return true
		}
	}
	return t.retiring[cluster] != nil
}

// Kept lists the clusters among names that this process still keeps
// anything of: a teardown's state, a finished teardown not yet gone, the
// stamp of a signal work being retired, or a metric series exported with
// the cluster's name.
func (a *ClusterTeardown) Kept(names ...string) []string {
	var out []string
	for _, name := range names {
		if a.Teardowns.keeps(name) || a.Metrics.Exports(name) {
			out = append(out, name)
		}
	}
	return out
}

// reported keeps what the report r of the teardown's step, under the plan
// that decided it (nil when none could be made), says: whether the
// teardown has begun, where outside its namespace it waits, its step's
// metric series and whether its policy's blast radius holds it. It returns
// whether the teardown waits outside its namespace, and whether it has
// begun.
func (st *teardownState) reported(mc *unstructured.Unstructured, plan *decision.Plan, r *decision.Report) (waits, begun bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.ended {
		st.keepReport(mc, plan, r)
	}
	return len(st.outside) > 0, st.begun
}

// keepReport is reported's, under the state's lock.
func (st *teardownState) keepReport(mc *unstructured.Unstructured, plan *decision.Plan, r *decision.Report) {
	m := st.metrics
	st.outside = r.WaitsOutside
	st.series = m.Step(mc, st.series, plan, r.Reason)
	if plan == nil {
		return
	}
	switch begun := decision.ReportBegun(r); {
	case begun:
		st.begun = true
	case !st.begun || plan.Policy != "":
		st.begun, st.policy = false, plan.Policy
	}
	budget := ""
	if r.Reason == v1alpha1.BlastRadiusExceededReason {
		budget = plan.Policy
	}
	m.Budget(st.budget, budget)
	st.budget = budget
}

// observeRemaining exports the objects the teardown's current step still
// acts on or waits for.
func (st *teardownState) observeRemaining(step string, n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return
	}
	st.metrics.SetRemaining(st.cluster, st.remaining, step, n)
	st.remaining = step
}

// DefaultProgressInterval is how often, at most, a running step's progress
// is written on its object when nothing but its counts changed.
const DefaultProgressInterval = 5 * time.Second

// progress paces the writes of a teardown's progress: at most once per
// interval while it runs, whether its step or only its counts changed; a
// change held back is written by a requeue at the end of the interval, so
// the last progress is always written. It is memory only: after a restart
// the first change is written at once. The counts stay current in metrics
// meanwhile.
type progress struct {
	interval time.Duration
	now      func() time.Time
}

// progressMark is the step last written on an object, and when, and
// whether it showed the teardown running; each teardown's state keeps its
// own.
type progressMark struct {
	step    string
	at      time.Time
	running bool
}

func newProgress(interval time.Duration) *progress {
	return &progress{interval: interval, now: time.Now}
}

// hold says how long a write of step on the object whose last write is
// last waits: 0 to write now (another step than the last one written, none
// written by this process, or the interval passed), else the rest of the
// interval.
func (p *progress) hold(last *progressMark, step string) time.Duration {
	if last == nil || last.step != step {
		return 0
	}
	return p.wait(last)
}

// wait says how long any write on the object whose last write is last
// waits: 0 when none was written by this process or the interval passed,
// else the rest of the interval.
func (p *progress) wait(last *progressMark) time.Duration {
	if p == nil || p.interval <= 0 || last == nil {
		return 0
	}
	return max(p.interval-p.now().Sub(last.at), 0)
}

// mark is the mark of a write of step now.
func (p *progress) mark(step string, running bool) *progressMark {
	if p == nil {
		return nil
	}
	return &progressMark{step: step, at: p.now(), running: running}
}
