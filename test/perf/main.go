// Command perf measures the operator as users run it: the manager binary
// built from ./cmd, started with its default flags and the RBAC it ships
// with, against a real kube-apiserver and etcd that write every write
// request to an audit log. It compares a cluster teardown with a bare client
// loop and with OCM's own gc controller, and measures the operator's memory
// on an idle fleet. docs/developer/performance.md says how to run it and what it
// printed.
//
// It is a Go module of its own because OCM's controllers build with other
// Kubernetes libraries than the operator; it reaches the operator only
// through the binary and the API server.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// teardownCase is a row of the teardown table.
type teardownCase struct {
	name       string
	fleet      fleet
	agentDelay time.Duration
	// maxConcurrent is the pace of the operator-paced contender (50 where
	// the case sets none).
	maxConcurrent int
}

var teardownCases = map[string]teardownCase{
	"one": {name: "1 cluster, 10 addons + 500 works, agent 300 ms",
		fleet: fleet{clusters: 1, addons: 10, works: 500, prioritised: true}, agentDelay: 300 * time.Millisecond},
	// tiny is for the smoke test.
	"tiny": {name: "1 cluster, 2 addons + 4 works, agent 300 ms",
		fleet: fleet{clusters: 1, addons: 2, works: 4, prioritised: true}, agentDelay: 300 * time.Millisecond},
	"twenty": {name: "20 clusters at once, 2 addons + 100 works each, agent 300 ms",
		fleet: fleet{clusters: 20, addons: 2, works: 100}, agentDelay: 300 * time.Millisecond},
	// storm is a region decommissioned: 200 clusters deleted in one call.
	"storm": {name: "storm: 200 clusters at once, 2 addons + 50 works each, agent 300 ms",
		fleet: fleet{clusters: 200, addons: 2, works: 50, inOneCall: true}, agentDelay: 300 * time.Millisecond},
	// storm-tiny is the storm's shape for the smoke test.
	"storm-tiny": {name: "storm, tiny: 3 clusters at once, 2 addons + 3 works each, agent 300 ms",
		fleet: fleet{clusters: 3, addons: 2, works: 3, inOneCall: true}, agentDelay: 300 * time.Millisecond, maxConcurrent: 1},
}

// config is what the environment chooses (see docs/developer/performance.md).
type config struct {
	scenarios   []string // teardown, idle
	cases       []string // one, twenty
	contenders  []string
	rounds      int // teardowns of each contender, in turns (BENCH_ROUNDS)
	clusters    int // idle fleet
	worksPer    int
	quiet, idle time.Duration
	timeout     time.Duration
	workDir     string
	keep        bool
	knobs       knobs
}

func env(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) (int, error) {
	v, err := strconv.Atoi(env(key, strconv.Itoa(def)))
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%s must be a positive integer", key)
	}
	return v, nil
}

func envDuration(key string, def time.Duration) (time.Duration, error) {
	v, err := time.ParseDuration(env(key, def.String()))
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%s must be a positive duration such as 30s", key)
	}
	return v, nil
}

func list(key, def string) []string { return strings.Split(env(key, def), ",") }

func readConfig() (config, error) {
	c := config{
		scenarios:  list("BENCH_SCENARIOS", "teardown,idle"),
		cases:      list("BENCH_TEARDOWN_CASES", "one,twenty"),
		contenders: list("BENCH_CONTENDERS", "bare,bare16,ocm,operator,operator-cold"),
		workDir:    os.Getenv("BENCH_WORK_DIR"),
		keep:       os.Getenv("BENCH_KEEP") == "true",
	}
	var err error
	if c.rounds, err = envInt("BENCH_ROUNDS", 1); err != nil {
		return c, err
	}
	if c.clusters, err = envInt("BENCH_CLUSTERS", 300); err != nil {
		return c, err
	}
	if c.worksPer, err = envInt("BENCH_WORKS_PER_CLUSTER", 10); err != nil {
		return c, err
	}
	if c.quiet, err = envDuration("BENCH_QUIET", 10*time.Second); err != nil {
		return c, err
	}
	if c.idle, err = envDuration("BENCH_IDLE", 30*time.Second); err != nil {
		return c, err
	}
	if c.timeout, err = envDuration("BENCH_TIMEOUT", 15*time.Minute); err != nil {
		return c, err
	}
	if c.knobs, err = readKnobs(); err != nil {
		return c, err
	}
	for _, s := range c.scenarios {
		if s != "teardown" && s != "idle" {
			return c, fmt.Errorf("BENCH_SCENARIOS: unknown scenario %q (teardown, idle)", s)
		}
	}
	for _, s := range c.cases {
		if _, ok := teardownCases[s]; !ok {
			return c, fmt.Errorf("BENCH_TEARDOWN_CASES: unknown case %q (one, twenty, storm, tiny, storm-tiny)", s)
		}
	}
	for _, s := range c.contenders {
		if _, ok := contenders[s]; !ok {
			return c, fmt.Errorf("BENCH_CONTENDERS: unknown contender %q (%s)", s, strings.Join(contenderOrder, ", "))
		}
	}
	return c, nil
}

func main() {
	flag.Parse()
	quietLogs()
	cfg, err := readConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := runAll(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		os.Exit(1)
	}
}

// quietLogs sends the logs of the in-process controllers nowhere.
func quietLogs() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	logf.SetLogger(zap.New(zap.WriteTo(io.Discard)))
}

func runAll(ctx context.Context, cfg config, out io.Writer) error {
	p, err := findPaths()
	if err != nil {
		return err
	}
	p.knobs = cfg.knobs
	dir := cfg.workDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cleanup-perf-*"); err != nil {
			return err
		}
		if !cfg.keep {
			defer os.RemoveAll(dir)
		}
	}
	fmt.Fprintf(out, "building the manager from %s/cmd\n", p.root)
	mgrBin, err := buildManager(p, dir)
	if err != nil {
		return err
	}
	printMachine(out)
	if k := cfg.knobs.String(); k != "" {
		fmt.Fprintf(out, "not as shipped: %s\n", k)
	}
	for _, s := range cfg.scenarios {
		switch s {
		case "teardown":
			var rows [][]teardownResult
			for _, name := range cfg.cases {
				row, err := teardownTable(ctx, cfg, p, mgrBin, filepath.Join(dir, "teardown-"+name), teardownCases[name], out)
				if err != nil {
					return err
				}
				rows = append(rows, row)
			}
			summary(out, cfg, rows)
		case "idle":
			f := fleet{clusters: cfg.clusters, works: cfg.worksPer}
			if err := idleFleet(ctx, cfg, p, mgrBin, filepath.Join(dir, "idle"), f, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func printMachine(out io.Writer) {
	load, _ := os.ReadFile("/proc/loadavg")
	host, _ := os.Hostname()
	fmt.Fprintf(out, "machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s; load average %s\n",
		host, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(),
		strings.Join(strings.Fields(string(load))[:3], " "))
}

func loadAverage() string {
	load, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(load))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

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

// summary prints the teardown cases side by side: time, writes and peak RSS
// (* the harness process's).
func summary(out io.Writer, cfg config, rows [][]teardownResult) {
	fmt.Fprintf(out, "\n## teardown summary (time, writes, peak RSS; * RSS of the harness process)\n\n| teardown |")
	for _, key := range cfg.contenders {
		fmt.Fprintf(out, " %s |", contenders[key].name)
	}
	fmt.Fprintf(out, "\n|---|%s\n", strings.Repeat("---|", len(cfg.contenders)))
	for i, row := range rows {
		fmt.Fprintf(out, "| %s |", teardownCases[cfg.cases[i]].name)
		for _, r := range row {
			star := ""
			if r.inProcess {
				star = "*"
			}
			fmt.Fprintf(out, " %.2f s, %d, %s%s |", r.took.Seconds(), r.writes.total(), mib(r.mem.peak), star)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "\nload average at the end: %s\n", loadAverage())
}

func teardownOnce(ctx context.Context, cfg config, p paths, mgrBin, dir string, tc teardownCase, c contender) (teardownResult, error) {
	res := teardownResult{c: c}
	cp, err := startControlPlane(p, dir)
	if err != nil {
		return res, err
	}
	defer func() { _ = cp.stop() }()
	admin, err := client.New(cp.admin, client.Options{Scheme: newScheme()})
	if err != nil {
		return res, err
	}
	if err := populate(ctx, admin, tc.fleet); err != nil {
		return res, err
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	agentCfg, err := cp.user(userAgent, "system:masters")
	if err != nil {
		return res, err
	}
	agentSwept.Store(0)
	if err := startAgent(rctx, agentCfg, tc.agentDelay); err != nil {
		return res, err
	}
	r := &run{p: p, cp: cp, admin: admin, fleet: tc.fleet, mgrBin: mgrBin, maxConcurrent: cmp.Or(tc.maxConcurrent, 50)}
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
	res.took = end.Sub(start)
	res.load = loadAverage()
	if res.mem, err = readMemory(inst.pid); err != nil {
		return res, err
	}
	// What the contender writes just after the end (a last status) counts.
	time.Sleep(2 * time.Second)
	all, err := readWrites(cp.auditLog, start, time.Time{})
	if err != nil {
		return res, err
	}
	during, err := readWrites(cp.auditLog, start, end)
	if err != nil {
		return res, err
	}
	res.writes = all[c.user]
	if res.writes == nil {
		res.writes = writes{}
	}
	res.tail = res.writes.total() - during[c.user].total()
	res.agent = all[userAgent].total()
	res.swept = agentSwept.Load()
	return res, nil
}
