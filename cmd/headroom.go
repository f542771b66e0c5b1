package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// HeapHeadroom is the least the heap may grow between collections under
// the manager's default GOGC. DefaultGOGC keeps a large fleet's memory
// near its cache, but a hub of a few clusters has a live heap of tens of
// MiB, which 30% lets grow by a few MiB: its teardowns then spent a third
// of the manager's CPU collecting (docs/developer/results.md, "The manager's
// GOGC").
const HeapHeadroom = 32 << 20

// maxGOGC bounds the GOGC the headroom sets, for a heap of almost nothing
// live (at start), and what it leaves if collections stopped calling it.
const maxGOGC = 300

// gcPercentFor is the GOGC that lets a live heap of live bytes grow by
// headroom bytes, and never by less than gogc percent.
func gcPercentFor(live uint64, gogc int, headroom uint64) int {
	if live == 0 {
		return maxGOGC
	}
	return max(gogc, min(int(headroom*100/live), maxGOGC))
}

// keepHeadroom sets GOGC after each collection to gcPercentFor the heap
// then live: for a large fleet it stays gogc, for a small one the heap
// may grow by headroom. It reacts to the collections themselves (a
// finalizer runs once after each), and stops when the returned func is
// called.
func keepHeadroom(gogc int, headroom uint64) (stop func()) {
	var stopped atomic.Bool
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := gogc
	var arm func()
	arm = func() {
		// With a pointer, so not batched by the tiny allocator, whose
		// objects may never be finalized.
		s := &gcSentinel{}
		runtime.SetFinalizer(s, func(*gcSentinel) {
			if stopped.Load() {
				return
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				if p := gcPercentFor(sample[0].Value.Uint64(), gogc, headroom); p != current {
					current = p
					debug.SetGCPercent(p)
				}
			}
			arm()
		})
	}
	debug.SetGCPercent(gogc)
	arm()
	return func() { stopped.Store(true) }
}

type gcSentinel struct {
	_ *byte
}
