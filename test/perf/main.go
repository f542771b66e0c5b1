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

// config is what the environment chooses (see docs/developer/results.md, "How to
// run").
type config struct {
	scenarios   []string // teardown, idle
	cases       []string // one, twenty
	contenders  []string
	rounds      int // teardowns of each contender, in turns (BENCH_ROUNDS)
	pace        int // operator-paced's maxConcurrent, instead of the case's (BENCH_PACE)
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
	if os.Getenv("BENCH_PACE") != "" {
		if c.pace, err = envInt("BENCH_PACE", 0); err != nil {
			return c, err
		}
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
	mgrBin, err := buildManager(p, dir, out)
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
