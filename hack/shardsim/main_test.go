package main

import (
	"bytes"
	"strings"
	"testing"
)

// The figures docs/developer/sharding.md quotes rest on these properties.
func TestRendezvousMovesOnlyWhatTheNewReplicaWins(t *testing.T) {
	names, _ := fleet(4000, 20)
	for n := 2; n <= 8; n++ {
		got := moved(names, n, n+1, rendezvous)
		want := 1 / float64(n+1)
		if got < want*0.8 || got > want*1.2 {
			t.Errorf("%d -> %d replicas: %.3f of the clusters moved, want about %.3f", n, n+1, got, want)
		}
		for _, k := range names {
			if before, after := rendezvous(k, n), rendezvous(k, n+1); before != after && after != n {
				t.Fatalf("%s moved from replica %d to %d, not to the new replica %d", k, before, after, n)
			}
		}
	}
	if m := moved(names, 4, 5, modulo); m < 0.7 {
		t.Errorf("modulo moved %.3f going from 4 to 5 replicas; the design's reason to prefer rendezvous is gone", m)
	}
}

func TestSpreadIsEven(t *testing.T) {
	names, _ := fleet(10000, 20)
	for _, a := range []assign{modulo, rendezvous} {
		if im := imbalance(spread(names, 4, a)); im > 0.05 {
			t.Errorf("imbalance %.3f over 4 replicas, want under 5%%", im)
		}
	}
	if im := imbalance([]int{3, 1}); im != 0.5 {
		t.Errorf("imbalance([3 1]) = %v, want 0.5", im)
	}
}

func TestReportNamesEveryRow(t *testing.T) {
	var b bytes.Buffer
	report(&b, 200, 4, 1)
	if got := strings.Count(b.String(), "| rendezvous |"); got != 4 {
		t.Errorf("report has %d rendezvous rows, want 4:\n%s", got, b.String())
	}
}
