package controller

import (
	"testing"
	"time"
)

func TestFleetPace(t *testing.T) {
	var p fleetPace
	if got := p.after("p"); got != 0 {
		t.Fatalf("a policy with no pass yet waits %s, want 0", got)
	}
	p.passed("p", 300*time.Millisecond)
	if got := p.after("p"); got != 600*time.Millisecond {
		t.Fatalf("after a pass of 300ms: %s, want 600ms", got)
	}
	if got := p.after("q"); got != 0 {
		t.Fatalf("another policy waits %s, want 0", got)
	}
	p.passed("p", time.Minute)
	if got := p.after("p"); got != maxFleetPace {
		t.Fatalf("after a pass of a minute: %s, want the bound %s", got, maxFleetPace)
	}
	p.forget("p")
	if got := p.after("p"); got != 0 {
		t.Fatalf("a deleted policy's pace is kept: %s", got)
	}
}
