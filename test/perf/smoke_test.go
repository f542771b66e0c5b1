package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs every contender on a tiny teardown (1 cluster, 2 add-ons,
// 4 works) and the idle fleet at 1 cluster of 3 works: it checks that the
// harness measures what it says, not how fast anything is. `make
// bench-smoke`; each contender starts a control plane of its own, so this
// takes a minute or two.
func TestSmoke(t *testing.T) {
	quietLogs()
	p, err := findPaths()
	if err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	mgrBin, err := buildManager(p, dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{timeout: 3 * time.Minute, quiet: 2 * time.Second, idle: 3 * time.Second}
	tc := teardownCases["tiny"]
	for _, key := range contenderOrder {
		t.Run(key, func(t *testing.T) {
			c := contenders[key]
			res, err := teardownOnce(ctx, cfg, p, mgrBin, filepath.Join(dir, key), tc, c)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.2f s, peak RSS %s, writes: %s", c.name, res.took.Seconds(), mib(res.mem.peak), res.writes)
			if res.took <= 0 || res.mem.peak <= 0 {
				t.Errorf("no time or no RSS measured: %+v", res)
			}
			// Every contender deletes the works and add-ons, one by one or
			// in collections (that each work was deleted, the agent's
			// finalizer removals below tell); the bare loop each once, and
			// the namespace.
			deletes := func(resource string) int {
				return res.writes["delete "+resource] + res.writes["deletecollection "+resource]
			}
			if deletes("manifestworks") < 1 || deletes("managedclusteraddons") < 1 {
				t.Errorf("the audit log does not show the deletes: %s", res.writes)
			}
			if strings.HasPrefix(key, "bare") {
				want := bareWrites()
				if key == "bare16-collection" || strings.HasPrefix(key, "bare16-guarded") {
					// each group of two or more in one request: the works
					// in two groups of two, the add-ons in one
					want = writes{"deletecollection manifestworks": 2, "deletecollection managedclusteraddons": 1, "delete namespaces": 1}
				}
				if res.writes.String() != want.String() {
					t.Errorf("bare loop writes: got %s, want %s", res.writes, want)
				}
			}
			procs := []string{"kube-apiserver", "etcd", "harness"}
			if !res.inProcess {
				procs = append(procs, "manager")
			}
			for _, name := range procs {
				if !res.cpu.has(name) {
					t.Errorf("no CPU time measured for %s: %s", name, res.cpu)
				}
			}
			if res.probe.idle.n == 0 || res.probe.during.n == 0 || res.probe.during.get <= 0 || res.probe.during.list <= 0 {
				t.Errorf("the probe measured nothing: %s", res.probe)
			}
			if res.agent != 4 {
				t.Errorf("the simulated agent wrote %d times, want 4 (one finalizer removal per work)", res.agent)
			}
		})
	}
	t.Run("storm, paced", func(t *testing.T) {
		storm := teardownCases["storm-tiny"]
		res, err := teardownOnce(ctx, cfg, p, mgrBin, filepath.Join(dir, "storm-paced"), storm, contenders["operator-paced"])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%.2f s, %s; %s", res.took.Seconds(), res.writes, res.note)
		if want := "at most 1 teardowns under way at once (maxConcurrent 1)"; res.note != want {
			t.Errorf("pace: got %q, want %q", res.note, want)
		}
		if res.writes["delete managedclusters"]+res.writes["deletecollection managedclusters"] != 0 {
			t.Errorf("the operator deleted clusters: %s", res.writes)
		}
	})
	t.Run("bare16, waiting by watch", func(t *testing.T) {
		byWatch := p
		byWatch.bareWaitsByWatch = true
		res, err := teardownOnce(ctx, cfg, byWatch, mgrBin, filepath.Join(dir, "bare16-waiting-by-watch"), tc, contenders["bare16"])
		if err != nil {
			t.Fatal(err)
		}
		want := bareWrites()
		if res.writes.String() != want.String() {
			t.Errorf("bare loop writes: got %s, want %s", res.writes, want)
		}
	})
	t.Run("idle", func(t *testing.T) {
		var log testWriter
		res, err := idleOnce(ctx, cfg, p, mgrBin, filepath.Join(dir, "idle"), fleet{clusters: 1, works: 3}, &log)
		if err != nil {
			t.Fatal(err)
		}
		if res.peak <= 0 || res.rss <= 0 || res.peak < res.rss {
			t.Errorf("RSS not measured: peak %d, settled %d", res.peak, res.rss)
		}
		if n := res.idleWrites.total(); n != 0 {
			t.Errorf("the operator wrote on a steady fleet: %s", res.idleWrites)
		}
		t.Logf("policy change: %s", res.change)
		// work-000 of the three is the one the policy change orphans.
		if c := res.change; c.affected != 1 || c.once != 1 || c.again+c.missed+c.other != 0 || len(c.rest) != 0 {
			t.Errorf("the policy change: %s", c)
		}
	})
}

type testWriter struct{}

func (testWriter) Write(p []byte) (int, error) { return len(p), nil }

// bareWrites are the writes of a bare loop deleting the tiny fleet one by
// one: each work and add-on once, then the namespace.
func bareWrites() writes {
	return writes{"delete manifestworks": 4, "delete managedclusteraddons": 2, "delete namespaces": 1}
}
