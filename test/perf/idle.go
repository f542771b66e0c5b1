package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// idleResult is the operator on an idle fleet.
type idleResult struct {
	fleet      fleet
	governed   time.Duration // from the manager's start until every cluster carries its finalizer
	settled    time.Duration // from the start until the operator stopped writing for cfg.quiet
	idleWrites writes        // the operator's writes in the cfg.idle window after it settled
	idle       time.Duration
	peak, rss  int64 // VmHWM and VmRSS at the end, after the policy change
	load       string
	change     changeResult
	// cpuSettled is the manager's CPU time from its start until it
	// settled; cpuChange, from then until the policy change settled (the
	// idle window included).
	cpuSettled, cpuChange time.Duration
}

// idleFleet creates a fleet of clusters with works (no add-ons), a policy
// that governs them all, and starts the manager binary: it reports how long
// the operator takes to govern every cluster, its writes once settled (a
// steady fleet must cost none) and its RSS.
func idleFleet(ctx context.Context, cfg config, p paths, mgrBin, dir string, f fleet, out io.Writer) error {
	fmt.Fprintf(out, "\n## idle fleet: %d clusters x %d works = %d works, each one ConfigMap manifest of 512 bytes of data\n\n",
		f.clusters, f.works, f.clusters*f.works)
	res, err := idleOnce(ctx, cfg, p, mgrBin, dir, f, out)
	if err != nil {
		return fmt.Errorf("idle fleet: %w", err)
	}
	works := float64(f.clusters * f.works)
	fmt.Fprintf(out, "\n| clusters x works | all governed | writes once settled | peak RSS | settled RSS | per 1,000 works (peak / settled) |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(out, "| %d x %d | %.1f s | %d in %s | %s | %s | %.2f / %.2f MiB |\n\n", f.clusters, f.works, res.governed.Seconds(),
		res.idleWrites.total(), res.idle, mib(res.peak), mib(res.rss),
		float64(res.peak)/(1<<20)/(works/1000), float64(res.rss)/(1<<20)/(works/1000))
	if n := res.idleWrites.total(); n > 0 {
		fmt.Fprintf(out, "writes once settled: %s\n", res.idleWrites)
	}
	fmt.Fprintf(out, "settled (no operator write for %s) %.1f s after the start; load average at the end %s\n",
		cfg.quiet, res.settled.Seconds(), res.load)
	fmt.Fprintf(out, "policy change (orphaning rule %s): %s\n", changedRule, res.change)
	fmt.Fprintf(out, "manager CPU: %.1f s until settled, %.1f s idle and for the policy change\n",
		res.cpuSettled.Seconds(), res.cpuChange.Seconds())
	return nil
}

// idleOnce starts the operator on a fleet of its own that no one deletes,
// and measures how long it takes to govern every cluster and to settle,
// then what it writes and holds in memory while nothing happens.
func idleOnce(ctx context.Context, cfg config, p paths, mgrBin, dir string, f fleet, out io.Writer) (idleResult, error) {
	res := idleResult{fleet: f, idle: cfg.idle}
	cp, err := startControlPlane(p, dir)
	if err != nil {
		return res, err
	}
	defer func() { _ = cp.stop() }()
	admin, err := client.New(cp.admin, client.Options{Scheme: newScheme()})
	if err != nil {
		return res, err
	}
	began := time.Now()
	if err := populate(ctx, admin, f); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "- created the fleet in %.1f s\n", time.Since(began).Seconds())
	if err := createPolicy(ctx, admin, 0); err != nil {
		return res, err
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	r := &run{p: p, cp: cp, admin: admin, fleet: f, mgrBin: mgrBin}
	start := time.Now()
	op, err := startManager(rctx, r)
	if err != nil {
		return res, err
	}
	defer op.stop()
	wctx, wcancel := op.watchExit(rctx)
	defer wcancel()
	if err := waitFinalizer(wctx, admin, f.clusters, operatorFinalizer, idlePollEvery(f.clusters)); err != nil {
		return res, firstErr(op.exited(), err)
	}
	res.governed = time.Since(start)
	fmt.Fprintf(out, "- every cluster governed %.1f s after the manager started\n", res.governed.Seconds())

	tail := newAuditTail(cp.auditLog)
	settled, err := settle(wctx, tail, start, cfg.quiet)
	if err != nil {
		return res, firstErr(op.exited(), err)
	}
	res.settled = settled.Sub(start)
	if res.cpuSettled, err = cpuTime(op.cmd.Process.Pid); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "- settled %.1f s after the start; counting its writes for %s\n", res.settled.Seconds(), cfg.idle)
	select {
	case <-wctx.Done():
		return res, firstErr(op.exited(), wctx.Err())
	case <-time.After(cfg.idle):
	}
	if err := measureIdle(&res, cp.auditLog, settled); err != nil {
		return res, err
	}
	return res, changeAndMeasure(wctx, &res, op, admin, tail, cp.auditLog, cfg.quiet)
}

// changeAndMeasure changes the settled fleet's policy, then measures the
// manager (op) at the end.
func changeAndMeasure(ctx context.Context, res *idleResult, op *operatorProcess, admin client.Client, tail *auditTail, auditLog string, quiet time.Duration) error {
	var err error
	if res.change, err = policyChange(ctx, admin, tail, auditLog, quiet, res.fleet); err != nil {
		return firstErr(op.exited(), err)
	}
	return measureIdleEnd(res, op.cmd.Process.Pid)
}

// idlePollEvery is how often the harness lists the clusters while the
// operator governs them: listing a large fleet often would load the API
// server the operator is measured on.
func idlePollEvery(clusters int) time.Duration {
	if clusters > 1000 {
		return time.Second
	}
	return 250 * time.Millisecond
}

// settle returns when the operator has written nothing for quiet (counted
// from since at the earliest), and says when; it gives up when ctx ends.
func settle(ctx context.Context, tail *auditTail, since time.Time, quiet time.Duration) (time.Time, error) {
	for {
		last, err := tail.lastWrite(userOperator)
		if err != nil {
			return time.Time{}, err
		}
		if last.Before(since) {
			last = since
		}
		if time.Since(last) >= quiet {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("the operator did not settle: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// measureIdle takes the operator's writes since it settled, at the end of
// the idle time.
func measureIdle(res *idleResult, auditLog string, settled time.Time) error {
	byUser, err := readWrites(auditLog, settled, time.Now())
	if err != nil {
		return err
	}
	res.idleWrites = byUser[userOperator]
	if res.idleWrites == nil {
		res.idleWrites = writes{}
	}
	return nil
}

// measureIdleEnd takes the manager's (process pid) CPU time since it settled,
// its memory and the load, once the policy change has settled: the peak
// covers the fleet's re-evaluation too.
func measureIdleEnd(res *idleResult, pid int) error {
	cpu, err := cpuTime(pid)
	if err != nil {
		return err
	}
	res.cpuChange = cpu - res.cpuSettled
	mem, err := readMemory(pid)
	if err != nil {
		return err
	}
	res.peak, res.rss = mem.peak, mem.now
	res.load = loadAverage()
	return nil
}
