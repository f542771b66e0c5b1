package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// memory is a process's resident set size, from /proc/<pid>/status.
type memory struct {
	// peak is VmHWM, the peak RSS since the process started (or since
	// resetPeak).
	peak int64
	// now is VmRSS.
	now int64
}

// readMemory reads VmHWM and VmRSS of a process, in bytes.
func readMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("reading %s of process %d: %w", key, pid, err)
		}
		if key == "VmHWM" {
			m.peak = kb * 1024
		} else {
			m.now = kb * 1024
		}
	}
	return m, sc.Err()
}

// resetPeak resets VmHWM to the current RSS (Linux 4.0 and later), so that
// the peak of the harness's own process covers only what follows.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
