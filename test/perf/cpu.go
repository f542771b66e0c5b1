package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on Linux for every architecture the harness runs on.
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time (user and system) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis, where the third field is state.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// childOf returns the pid of the harness's child process whose command is
// name (kube-apiserver, etcd: envtest starts them), or 0.
func childOf(name string) int {
	entries, _ := os.ReadDir("/proc")
	parent := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if _, rest, ok := strings.Cut(string(stat), ") "); ok {
			if f := strings.Fields(rest); len(f) > 1 && f[1] == parent {
				return pid
			}
		}
	}
	return 0
}

// cpuUse is the CPU time of each process of a teardown over its course.
type cpuUse struct {
	names []string // in the order printed
	pids  map[string]int
	start map[string]time.Duration
	used  map[string]time.Duration
}

// startCPU notes the CPU time so far of the contender's process (when it
// is not the harness), kube-apiserver, etcd and the harness process (the
// simulated agent, and the contenders that run in it).
func startCPU(contender int, inProcess bool) *cpuUse {
	u := &cpuUse{pids: map[string]int{}, start: map[string]time.Duration{}, used: map[string]time.Duration{}}
	if !inProcess {
		u.add("manager", contender)
	}
	u.add("kube-apiserver", childOf("kube-apiserver"))
	u.add("etcd", childOf("etcd"))
	u.add("harness", os.Getpid())
	return u
}

func (u *cpuUse) add(name string, pid int) {
	if pid == 0 {
		return
	}
	t, err := cpuTime(pid)
	if err != nil {
		return
	}
	u.names = append(u.names, name)
	u.pids[name], u.start[name] = pid, t
}

// stop notes the CPU time each process used since startCPU.
func (u *cpuUse) stop() {
	for _, name := range u.names {
		if t, err := cpuTime(u.pids[name]); err == nil {
			u.used[name] = t - u.start[name]
		}
	}
}

func (u *cpuUse) total() time.Duration {
	var sum time.Duration
	for _, d := range u.used {
		sum += d
	}
	return sum
}

// String prints each process's CPU seconds, then the total.
func (u *cpuUse) String() string {
	if u == nil {
		return ""
	}
	parts := make([]string, 0, len(u.names))
	for _, name := range u.names {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, u.used[name].Seconds()))
	}
	return fmt.Sprintf("%.2f s (%s)", u.total().Seconds(), strings.Join(parts, ", "))
}
