package main

import (
	"os"
	"testing"
	"time"
)

// TestCPUTime: the harness's own CPU time grows while it computes, and its
// parent is not its child.
func TestCPUTime(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for i := range 1_000_000 {
			x += i
		}
		now, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now > before {
			if childOf("go") != 0 {
				t.Error("the go command that runs the test is taken for a child of the test")
			}
			return
		}
	}
	t.Fatalf("no CPU time counted in 10 s of computing (%d)", x)
}
