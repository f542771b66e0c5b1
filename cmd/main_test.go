package main

import (
	"bufio"
	"context"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// documentedFlags reads the flags table of docs/operations/configuration.md: the rows
// whose first cell is a `--flag`, by flag name, with their default.
func documentedFlags(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "operations", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		cells := strings.Split(s.Text(), "|")
		if len(cells) < 4 {
			continue
		}
		cell := strings.TrimSpace(cells[1])
		if !strings.HasPrefix(cell, "`--") {
			continue
		}
		name := strings.Trim(cell, "`")
		if _, dup := out[name[2:]]; dup {
			t.Errorf("%s is documented twice", name)
		}
		out[name[2:]] = strings.Trim(strings.TrimSpace(cells[2]), "`")
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The manager's flags and their defaults are the ones docs/operations/configuration.md
// documents, no more and no fewer.
func TestDefaultFlagsAreDocumented(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var f flags
	f.bind(fs)
	documented := documentedFlags(t)
	fs.VisitAll(func(fl *flag.Flag) {
		def, ok := documented[fl.Name]
		switch {
		case !ok:
			t.Errorf("--%s (default %q) is not documented in docs/operations/configuration.md", fl.Name, fl.DefValue)
		case def != fl.DefValue:
			t.Errorf("--%s: docs/operations/configuration.md says the default is %q, the manager's is %q", fl.Name, def, fl.DefValue)
		}
		delete(documented, fl.Name)
	})
	for name := range documented {
		t.Errorf("docs/operations/configuration.md documents --%s, which the manager does not have", name)
	}
}

// The defaults are the fast path: the client-side limit is the documented
// one and reaches the client, and the flow control objects are created.
func TestDefaultsReachTheClient(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var f flags
	f.bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{}
	f.limit(cfg)
	if cfg.QPS != DefaultKubeAPIQPS || cfg.Burst != DefaultKubeAPIBurst {
		t.Errorf("client limit %v QPS, burst %d; want %v, %d", cfg.QPS, cfg.Burst, DefaultKubeAPIQPS, DefaultKubeAPIBurst)
	}
	if !f.createFlowControl {
		t.Error("--create-flow-control is off by default")
	}

	if err := fs.Parse([]string{"--kube-api-qps=20", "--kube-api-burst=30"}); err != nil {
		t.Fatal(err)
	}
	f.limit(cfg)
	if cfg.QPS != 20 || cfg.Burst != 30 {
		t.Errorf("client limit %v QPS, burst %d; want 20, 30", cfg.QPS, cfg.Burst)
	}
}

// --pprof-bind-address serves Go's profiling endpoints once the manager
// starts; they are off by default.
func TestPprofFlagServesProfiles(t *testing.T) {
	// The manager needs a kubeconfig; nothing here reaches its server.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()

	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var f flags
	f.bind(fs)
	if f.pprofAddr != "0" {
		t.Errorf("--pprof-bind-address defaults to %q, want 0 (off)", f.pprofAddr)
	}
	if err := fs.Parse([]string{"--pprof-bind-address=" + addr, "--health-probe-bind-address=0"}); err != nil {
		t.Fatal(err)
	}
	mgr, err := newManager(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /debug/pprof/cmdline: %s", resp.Status)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the profiling endpoints never answered on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBlastRadiusFlags(t *testing.T) {
	for _, tc := range []struct {
		flags blastRadiusFlags
		err   string
	}{
		{blastRadiusFlags{window: time.Hour}, ""},
		{blastRadiusFlags{maxTeardowns: "5", window: time.Hour, maxConcurrent: 2}, ""},
		{blastRadiusFlags{maxTeardowns: "10%", window: time.Hour}, ""},
		{blastRadiusFlags{maxTeardowns: "ten", window: time.Hour}, "--blast-radius-max-teardowns"},
		{blastRadiusFlags{maxTeardowns: "101%", window: time.Hour}, "--blast-radius-max-teardowns"},
		{blastRadiusFlags{maxTeardowns: "-1", window: time.Hour}, "--blast-radius-max-teardowns"},
		{blastRadiusFlags{window: 0}, "--blast-radius-window"},
		{blastRadiusFlags{window: time.Hour, maxConcurrent: -1}, "--max-concurrent-teardowns"},
	} {
		b, err := tc.flags.budget()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%+v: %v", tc.flags, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: got %v, want an error naming %s", tc.flags, err, tc.err)
		case tc.err == "" && tc.flags.maxTeardowns != "" && b.MaxTeardowns.String() != tc.flags.maxTeardowns:
			t.Errorf("%+v: maxTeardowns %s", tc.flags, b.MaxTeardowns)
		}
	}
}
