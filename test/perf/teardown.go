// Command perf measures the operator as users run it: the manager binary
// built from ./cmd, started with its default flags and the RBAC it ships
// with, against a real kube-apiserver and etcd that write every write
// request to an audit log. It compares a cluster teardown with a bare client
// loop and with OCM's own gc controller, and measures the operator's memory
// on an idle fleet. docs/developer/results.md says how to run it and what it
// measured.
//
// It is a Go module of its own because OCM's controllers build with other
// Kubernetes libraries than the operator; it reaches the operator only
// through the binary and the API server.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// teardownResult is one contender's teardown.
type teardownResult struct {
	c         contender
	took      time.Duration
	writes    writes // the contender's, from the deletion of the clusters until 2 s after the end
	tail      int    // of those, made after the end
	agent     int    // the simulated agent's writes
	swept     int64  // works the agent found by its sweep, not its watch
	mem       memory
	inProcess bool
	load      string
	cpu       cpuUse // from the deletion of the clusters to the end
	probe     probeResult
	note      string // what the contender alone measured
}

// teardownTable runs the contenders on one teardown case, taking turns
// round by round, and prints each run and the table of their medians.
func teardownTable(ctx context.Context, cfg config, p paths, mgrBin, dir string, tc teardownCase, out io.Writer) ([]teardownResult, error) {
	fmt.Fprintf(out, "\n## teardown: %s (%s)\n\n", tc.name, tc.fleet)
	// runs[i] are contender i's runs, one a round; the contenders take
	// turns, so that a slower minute of the machine falls on all of them.
	runs := make([][]teardownResult, len(cfg.contenders))
	for round := 1; round <= cfg.rounds; round++ {
		for i, key := range cfg.contenders {
			c := contenders[key]
			res, err := teardownOnce(ctx, cfg, p, mgrBin, filepath.Join(dir, key), tc, c)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", tc.name, c.name, err)
			}
			fmt.Fprintf(out, "- %s%s: %.2f s, %d writes, peak RSS %s%s, CPU %s (load %s); probe %s\n", c.name, roundOf(round, cfg.rounds), res.took.Seconds(),
				res.writes.total(), mib(res.mem.peak), map[bool]string{true: " (the harness process)"}[res.inProcess], res.cpu, res.load, res.probe)
			runs[i] = append(runs[i], res)
		}
	}
	results := make([]teardownResult, len(runs))
	for i := range runs {
		results[i] = medianRun(runs[i])
	}
	if cfg.rounds > 1 {
		printRounds(out, runs)
	}
	fmt.Fprintf(out, "\n| contender | teardown | writes | peak RSS | CPU | writes by verb and resource |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		rss := mib(r.mem.peak)
		if r.inProcess {
			rss += " (harness process)"
		}
		tail := ""
		if r.tail > 0 {
			tail = fmt.Sprintf(" (%d after the end)", r.tail)
		}
		fmt.Fprintf(out, "| %s | %.2f s | %d%s | %s | %s | %s |\n", r.c.name, r.took.Seconds(), r.writes.total(), tail, rss, r.cpu, r.writes)
	}
	fmt.Fprintln(out)
	for _, r := range results {
		swept := ""
		if r.swept > 0 {
			swept = fmt.Sprintf(" (%d of the works it found by its 2 s sweep, not its watch)", r.swept)
		}
		note := ""
		if r.note != "" {
			note = "; " + r.note
		}
		fmt.Fprintf(out, "- %s: %s; the simulated agent wrote %d%s%s; probe %s.\n", r.c.name, r.c.about, r.agent, swept, note, r.probe)
	}
	return results, nil
}

// teardownOnce runs one contender once on a fleet of its own: the fleet
// and the agent started, the contender started, the clusters deleted, and
// the contender's time, CPU, memory and writes measured to its end.
func teardownOnce(ctx context.Context, cfg config, p paths, mgrBin, dir string, tc teardownCase, c contender) (teardownResult, error) {
	res := teardownResult{c: c}
	cp, admin, err := startPopulated(ctx, p, dir, tc.fleet)
	if err != nil {
		return res, err
	}
	defer func() { _ = cp.stop() }()
	rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := startAgentOf(rctx, cp, tc.agentDelay); err != nil {
		return res, err
	}
	r := &run{p: p, cp: cp, admin: admin, fleet: tc.fleet, mgrBin: mgrBin, maxConcurrent: cmp.Or(cfg.pace, tc.maxConcurrent, 50)}
	inst, err := c.start(rctx, r)
	if err != nil {
		return res, err
	}
	defer inst.stop()
	res.inProcess = inst.inProcess
	if inst.inProcess {
		// The peak covers the teardown only, not the harness's setup.
		_ = resetPeak(inst.pid)
	}
	prof, err := startProfiles(rctx, cfg.knobs, cp.admin, filepath.Base(filepath.Dir(dir))+"-"+filepath.Base(dir), !inst.inProcess)
	if err != nil {
		return res, err
	}
	pr, err := startProbe(rctx, cp, admin)
	if err != nil {
		return res, err
	}
	probeFrom := time.Now()
	time.Sleep(probeIdle)
	res.cpu = startCPU(inst.pid, inst.inProcess)
	start := time.Now()
	if err := deleteClusters(rctx, admin, tc.fleet); err != nil {
		return res, err
	}
	if err := inst.teardown(rctx); err != nil {
		return res, err
	}
	end := time.Now()
	res.cpu.stop()
	res.probe = probeResult{idle: pr.between(probeFrom, start), during: pr.between(start, end)}
	if inst.note != nil {
		res.note = inst.note()
	}
	if err := pr.failed(); err != nil {
		return res, fmt.Errorf("the probe client: %w", err)
	}
	if err := prof.wait(); err != nil {
		return res, err
	}
	return res, measureEnd(&res, inst.pid, cp.auditLog, start, end)
}

// startPopulated starts a control plane of its own in dir and creates the
// fleet on it, so that no contender meets another's leftovers.
func startPopulated(ctx context.Context, p paths, dir string, f fleet) (*controlPlane, client.Client, error) {
	cp, err := startControlPlane(p, dir)
	if err != nil {
		return nil, nil, err
	}
	admin, err := client.New(cp.admin, client.Options{Scheme: newScheme()})
	if err == nil {
		err = populate(ctx, admin, f)
	}
	if err != nil {
		_ = cp.stop()
		return nil, nil, err
	}
	return cp, admin, nil
}

// startAgentOf starts the simulated work agent as its own user, its count
// of swept works from zero for this run.
func startAgentOf(ctx context.Context, cp *controlPlane, agentDelay time.Duration) error {
	agentCfg, err := cp.user(userAgent, "system:masters")
	if err != nil {
		return err
	}
	agentSwept.Store(0)
	return startAgent(ctx, agentCfg, agentDelay)
}

// measureEnd takes, at the end of a teardown, its time, the load, and the
// memory of process pid; then, from the audit log, the writes of the
// contender from start and of the simulated agent. It waits 2 s before
// reading them: what the contender writes just after the end (a last
// status) counts, and is told apart as its tail.
func measureEnd(res *teardownResult, pid int, auditLog string, start, end time.Time) error {
	res.took = end.Sub(start)
	res.load = loadAverage()
	var err error
	if res.mem, err = readMemory(pid); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	all, err := readWrites(auditLog, start, time.Time{})
	if err != nil {
		return err
	}
	during, err := readWrites(auditLog, start, end)
	if err != nil {
		return err
	}
	res.writes = all[res.c.user]
	if res.writes == nil {
		res.writes = writes{}
	}
	res.tail = res.writes.total() - during[res.c.user].total()
	res.agent = all[userAgent].total()
	res.swept = agentSwept.Load()
	return nil
}
