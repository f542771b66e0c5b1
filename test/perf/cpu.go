package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on Linux for every architecture the harness runs on.
const clockTick = 10 * time.Millisecond

// statFields are the fields of /proc/<pid>/stat after the command name,
// which is in parentheses and may hold spaces: [0] is the state, [1] the
// parent's pid, [11] and [12] utime and stime.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return f, nil
}

// cpuTime is the CPU time (user and system) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, s := range f[11:13] {
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
		if f, err := statFields(pid); err == nil && f[1] == parent {
			return pid
		}
	}
	return 0
}

// cpuUse is the CPU time each process of a teardown used over its course,
// in the order printed.
type cpuUse []procCPU

type procCPU struct {
	name        string
	pid         int
	start, used time.Duration
}

// startCPU notes the CPU time so far of the contender's process (when it
// is not the harness), kube-apiserver, etcd and the harness process (the
// simulated agent, and the contenders that run in it).
func startCPU(contender int, inProcess bool) cpuUse {
	var u cpuUse
	add := func(name string, pid int) {
		if pid == 0 {
			return
		}
		if t, err := cpuTime(pid); err == nil {
			u = append(u, procCPU{name: name, pid: pid, start: t})
		}
	}
	if !inProcess {
		add("manager", contender)
	}
	add("kube-apiserver", childOf("kube-apiserver"))
	add("etcd", childOf("etcd"))
	add("harness", os.Getpid())
	return u
}

// stop notes the CPU time each process used since startCPU.
func (u cpuUse) stop() {
	for i := range u {
		if t, err := cpuTime(u[i].pid); err == nil {
			u[i].used = t - u[i].start
		}
	}
}

// has says whether the CPU time of the process name is measured.
func (u cpuUse) has(name string) bool {
	for _, p := range u {
		if p.name == name {
			return true
		}
	}
	return false
}

// total is the CPU time of every process measured.
func (u cpuUse) total() time.Duration {
	var t time.Duration
	for _, p := range u {
		t += p.used
	}
	return t
}

// String prints the total CPU seconds, then each process's.
func (u cpuUse) String() string {
	parts := make([]string, 0, len(u))
	for _, p := range u {
		parts = append(parts, fmt.Sprintf("%s %.2f", p.name, p.used.Seconds()))
	}
	return fmt.Sprintf("%.2f s (%s)", u.total().Seconds(), strings.Join(parts, ", "))
}

// controlPlaneCPUs and clientCPUs are the halves of the machine's CPUs a
// split run (BENCH_CPUS=split) gives the control plane and the clients,
// as taskset lists them.
func controlPlaneCPUs() string { return cpuRange(0, max(runtime.NumCPU()/2, 1)) }
func clientCPUs() string {
	n := runtime.NumCPU()
	return cpuRange(min(n/2, n-1), n)
}

func cpuRange(from, to int) string {
	if to-from <= 1 {
		return strconv.Itoa(from)
	}
	return fmt.Sprintf("%d-%d", from, to-1)
}

// splitCPUs pins kube-apiserver and etcd, every thread, to
// controlPlaneCPUs, and the harness to clientCPUs; the processes the
// harness starts after (the manager) inherit its CPUs.
func splitCPUs() error {
	pin := func(cpus string, pid int) error {
		if pid == 0 {
			return fmt.Errorf("splitting CPUs: process not found")
		}
		out, err := exec.Command("taskset", "--all-tasks", "--cpu-list", "--pid", cpus, strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("taskset %s %d: %v: %s", cpus, pid, err, out)
		}
		return nil
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if err := pin(controlPlaneCPUs(), childOf(name)); err != nil {
			return err
		}
	}
	return pin(clientCPUs(), os.Getpid())
}
