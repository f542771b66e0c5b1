package main

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultGOGC is the manager's garbage-collection target when GOGC is not
// set: the heap grows to 1.3 times what is live between collections,
// rather than Go's default of twice. Most of the manager's heap is its
// cache, live for good, so the default doubles a fleet's memory at start;
// docs/operations/configuration.md says what it costs.
const DefaultGOGC = 30

// memoryLimitShare is the share of the container's memory limit the Go
// runtime's soft limit is set to when GOMEMLIMIT is not set: the rest is
// for what the runtime does not count (the binary's mapped code).
const memoryLimitShare = 0.9

// cgroupLimitFiles hold the container's memory limit: cgroup v2, then v1.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// tuneMemory sets the Go runtime's memory defaults for the manager, unless
// the environment sets them: GOGC to DefaultGOGC (which keepHeadroom then
// raises while the live heap is small), and the soft memory limit
// to memoryLimitShare of the container's memory limit, when there is one.
// It returns the values it set (-1: left as they were).
func tuneMemory(getenv func(string) (string, bool), limitFiles []string) (gogc int, limit int64) {
	gogc, limit = -1, -1
	if _, set := getenv("GOGC"); !set {
		gogc = DefaultGOGC
		debug.SetGCPercent(gogc)
	}
	if _, set := getenv("GOMEMLIMIT"); !set {
		if l, ok := containerMemoryLimit(limitFiles); ok {
			limit = int64(float64(l) * memoryLimitShare)
			debug.SetMemoryLimit(limit)
		}
	}
	return gogc, limit
}

// containerMemoryLimit reads the first limit file that exists. "max", or a
// value no machine has (cgroup v1's unlimited is near 2^63), is no limit.
func containerMemoryLimit(files []string) (int64, bool) {
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(raw))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// gogcOf and limitOf say, for the log, what tuneMemory set.
func gogcOf(v int) string {
	if v < 0 {
		return "from the environment: " + os.Getenv("GOGC")
	}
	return strconv.Itoa(v) + ", more while the live heap is small: at least " + strconv.Itoa(HeapHeadroom>>20) + " MiB of growth between collections"
}

func limitOf(v int64) string {
	switch {
	case v >= 0:
		return strconv.FormatInt(v, 10)
	case os.Getenv("GOMEMLIMIT") != "":
		return "from the environment: " + os.Getenv("GOMEMLIMIT")
	}
	return "none (no container memory limit)"
}
