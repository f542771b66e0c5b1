package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestTuneMemory(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2 := file("memory.max", "536870912\n")
	v2max := file("memory.max.unlimited", "max\n")
	v1 := file("memory.limit_in_bytes", "1073741824\n")
	v1max := file("memory.limit_in_bytes.unlimited", "9223372036854771712\n")
	junk := file("junk", "lots\n")
	missing := filepath.Join(dir, "missing")

	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	env := func(vars ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for _, v := range vars {
				if v == k {
					return "set", true
				}
			}
			return "", false
		}
	}
	for _, tc := range []struct {
		name      string
		env       []string
		files     []string
		gogc      int
		limit     int64
		wantLimit int64 // what the runtime holds after
	}{
		{"cgroup v2 limit", nil, []string{v2, v1}, DefaultGOGC, 483183820, 483183820},
		{"cgroup v1 limit", nil, []string{missing, v1}, DefaultGOGC, 966367641, 966367641},
		{"no limit (v2)", nil, []string{v2max, v1}, DefaultGOGC, -1, math.MaxInt64},
		{"no limit (v1)", nil, []string{missing, v1max}, DefaultGOGC, -1, math.MaxInt64},
		{"unreadable limit", nil, []string{junk}, DefaultGOGC, -1, math.MaxInt64},
		{"no cgroup", nil, []string{missing}, DefaultGOGC, -1, math.MaxInt64},
		{"the environment decides", []string{"GOGC", "GOMEMLIMIT"}, []string{v2}, -1, -1, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			gogc, limit := tuneMemory(env(tc.env...), tc.files)
			if gogc != tc.gogc || limit != tc.limit {
				t.Fatalf("tuneMemory = %d, %d; want %d, %d", gogc, limit, tc.gogc, tc.limit)
			}
			wantGOGC := 100
			if tc.gogc > 0 {
				wantGOGC = tc.gogc
			}
			if got := debug.SetGCPercent(-1); got != wantGOGC {
				t.Errorf("GOGC %d, want %d", got, wantGOGC)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
