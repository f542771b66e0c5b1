package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, maxGOGC},
		{16 * mib, 200},          // a hub of a few clusters: the headroom
		{64 * mib, 50},           // the headroom is half the heap
		{107 * mib, DefaultGOGC}, // 32 MiB is 30% of it
		{400 * mib, DefaultGOGC}, // a large fleet: its GOGC
		{1 * mib, maxGOGC},       // at start: bounded
	} {
		if got := gcPercentFor(tc.live, DefaultGOGC, HeapHeadroom); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.live/mib, got, tc.want)
		}
	}
}

// The headroom follows the collections: after one, GOGC is what the live
// heap calls for, not the default set before it.
func TestKeepHeadroom(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := keepHeadroom(DefaultGOGC, 1<<40) // more than any test heap: GOGC goes to maxGOGC
	defer stop()
	if got := debug.SetGCPercent(DefaultGOGC); got != DefaultGOGC {
		t.Fatalf("GOGC %d before any collection, want %d", got, DefaultGOGC)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		runtime.GC() // the finalizer runs after the collection that found the sentinel gone
		got := debug.SetGCPercent(DefaultGOGC)
		debug.SetGCPercent(got)
		if got == maxGOGC {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after collections, want %d", got, maxGOGC)
		}
		runtime.Gosched()
	}
}
