package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// inflight remembers, per object UID, what this process already did, so
// that a cache that has not caught up yet does not cause the same write
// twice. It is memory only: after a restart the cache shows the effects.
// The plan reads it as decision.Memory.
type inflight struct {
	mu        sync.Mutex
	sets      map[inflightKind]sets.Set[types.UID]
	byCluster map[string]sets.Set[types.UID]
	// done are clusters whose finalizer this process removed.
	done sets.Set[types.UID]
	// stamps are the generations of works this process gave a
	// deleteOption, so that a cache that has not caught up with the stamp
	// is not taken for a work the agent applied it to.
	stamps map[types.UID]int64
	// stampCount counts those stamps per work, to stop a write war.
	stampCount map[types.UID]int
	// suspended are the clusters this process saw paused or under a
	// suspended policy, until their first teardown reconcile after it
	// reports the resume.
	suspended sets.Set[types.UID]
}

type inflightKind int

const (
	deleted inflightKind = iota
	forcedSet
)

func newInflight() *inflight {
	return &inflight{
		sets:       map[inflightKind]sets.Set[types.UID]{deleted: {}, forcedSet: {}},
		byCluster:  map[string]sets.Set[types.UID]{},
		done:       sets.New[types.UID](),
		stamps:     map[types.UID]int64{},
		stampCount: map[types.UID]int{},
		suspended:  sets.New[types.UID](),
	}
}

// sawSuspended remembers that the cluster was paused or suspended.
func (f *inflight) sawSuspended(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.suspended.Insert(uid)
}

// resumed says whether the cluster was seen paused or suspended since its
// resume was last reported.
func (f *inflight) resumed(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.suspended.Has(uid)
}

// forgetSuspended drops the cluster from those seen paused or suspended:
// its resume is reported, or it is not being deleted.
func (f *inflight) forgetSuspended(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.suspended.Delete(uid)
}

// memory is what the plan of a cluster reads of this process's writes.
func (f *inflight) memory(cluster string) decision.Memory {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := decision.Memory{Stamped: map[types.UID]int64{}, Restamps: map[types.UID]int{},
		Deleted: map[types.UID]bool{}, Forced: map[types.UID]bool{}}
	for uid := range f.byCluster[cluster] {
		if g, ok := f.stamps[uid]; ok {
			m.Stamped[uid] = g
			m.Restamps[uid] = max(f.stampCount[uid]-1, 0)
		}
		if f.sets[deleted].Has(uid) {
			m.Deleted[uid] = true
		}
		if f.sets[forcedSet].Has(uid) {
			m.Forced[uid] = true
		}
	}
	return m
}

// stamped is the generation this process stamped on a work, if any.
func (f *inflight) stamped(uid types.UID) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stamps[uid]
}

func (f *inflight) stamp(cluster string, uid types.UID, generation int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stamps[uid] = generation
	f.stampCount[uid]++
	f.clusterOf(cluster).Insert(uid)
}

func (f *inflight) forgetStamp(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.stamps, uid)
	delete(f.stampCount, uid)
}

// maxFinished bounds the finished clusters remembered; the cache has long
// caught up with the oldest of them.
const maxFinished = 10000

func (f *inflight) finish(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done.Len() >= maxFinished {
		f.done = sets.New[types.UID]()
	}
	f.done.Insert(uid)
}

func (f *inflight) finished(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done.Has(uid)
}

func (f *inflight) add(k inflightKind, cluster string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[k].Insert(uid)
	f.clusterOf(cluster).Insert(uid)
}

func (f *inflight) clusterOf(cluster string) sets.Set[types.UID] {
	if f.byCluster[cluster] == nil {
		f.byCluster[cluster] = sets.New[types.UID]()
	}
	return f.byCluster[cluster]
}

// forgetCluster drops what was remembered for a cluster whose cleanup ended.
func (f *inflight) forgetCluster(cluster string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid := range f.byCluster[cluster] {
		for _, s := range f.sets {
			s.Delete(uid)
		}
		delete(f.stamps, uid)
		delete(f.stampCount, uid)
	}
	delete(f.byCluster, cluster)
}
