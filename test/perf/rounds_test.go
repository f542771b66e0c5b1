package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRounds: the tables show each contender's run of median time, and
// each round's ratio is taken against the first contender's run of the
// same round.
func TestRounds(t *testing.T) {
	run := func(name string, secs float64) teardownResult {
		return teardownResult{c: contender{name: name}, took: time.Duration(secs * float64(time.Second))}
	}
	bare := []teardownResult{run("bare", 2), run("bare", 4), run("bare", 3)}
	op := []teardownResult{run("op", 3), run("op", 4), run("op", 6)}
	if got := medianRun(op).took; got != 4*time.Second {
		t.Errorf("median run of 3, 4, 6 s: %v", got)
	}
	if got := medianRun(op[:2]).took; got != 3*time.Second {
		t.Errorf("median run of 3, 4 s: %v, want the faster", got)
	}
	var out bytes.Buffer
	printRounds(&out, [][]teardownResult{bare, op})
	// op over bare, round by round: 1.50, 1.00, 2.00; median 1.50.
	if want := "| op | 3.00, 4.00, 6.00 | 4.00 s | 0.00 s | 1.50, 1.00, 2.00 | 1.50 |"; !strings.Contains(out.String(), want) {
		t.Errorf("got\n%s\nwant a line %q", out.String(), want)
	}
}
