package crash

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

const (
	// maxKillsPerRound bounds the kills of one round of teardowns, after
	// which the manager is left to finish them.
	maxKillsPerRound = 8
	// maxRounds bounds the rounds the test runs to reach its kill points.
	maxRounds = 8
	// addonsPerCluster and worksPerGroup size a cluster's content: three
	// add-ons and 18 works in three cleanup-priority groups, and the
	// signal work.
	addonsPerCluster = 3
	worksPerGroup    = 6
)

// TestCrashSafety deletes a cluster of each strategy at once, kills the
// manager with SIGKILL at random points of their teardowns and restarts it
// at once, until they end; round after round, until each strategy's
// teardowns have been interrupted at CRASH_KILL_POINTS points or more. A
// kill point falls after a random count of the operator's writes to the
// round's clusters (thresholds spread over the whole teardown) or a random
// time after the restarted manager's first such write, whichever comes
// first. Then the audit log must show every teardown complete, in order,
// with no object deleted twice and nothing deleted outside the clusters.
func TestCrashSafety(t *testing.T) {
	seed := seedFor(t)
	minPoints := testenv.EnvInt(t, "CRASH_KILL_POINTS", 20)
	rng := rand.New(rand.NewPCG(seed, 1))
	h := newHarness(t, seed, time.Duration(testenv.EnvInt(t, "CRASH_MINUTES", 6))*time.Minute)
	users := []string{operatorUser}

	var mgr *process
	running := func() []*process { return []*process{mgr} }
	mgr = h.start(operatorUser)
	defer func() { mgr.kill() }()

	bystander := h.fleet("crash-bystander", []v1alpha1.RemoveStrategyType{v1alpha1.RemoveStrategyRequired}, running)
	points := map[v1alpha1.RemoveStrategyType]int{}
	enough := func() bool {
		for _, s := range strategies {
			if points[s] < minPoints {
				return false
			}
		}
		return true
	}
	var all []*teardown
	var wg sync.WaitGroup
	span := 200 // the writes a round is expected to take; learnt from each round
	kills := 0
	began := time.Now()
	for round := 1; !enough(); round++ {
		if round > maxRounds {
			t.Fatalf("after %d rounds, the kill points per strategy are %v, fewer than %d: the teardowns are too short for the kills", maxRounds, points, minPoints)
		}
		tds := h.fleet(fmt.Sprintf("crash-r%d", round), strategies, running)
		all = append(all, tds...)
		clusters := map[string]bool{}
		for _, td := range tds {
			clusters[td.cluster] = true
		}
		if err := h.audit.poll(); err != nil {
			t.Fatal(err)
		}
		mark := h.audit.len()
		thresholds := make([]int, maxKillsPerRound)
		for i := range thresholds {
			thresholds[i] = 1 + rng.IntN(span)
		}
		slices.Sort(thresholds)
		h.deleteClusters(tds, rng, &wg)

		for k := 0; len(h.inFlight(tds)) > 0; k++ {
			if k == maxKillsPerRound {
				h.until("the teardowns of round "+strconv.Itoa(round)+" end"+h.status(tds), running, func() (bool, error) {
					return len(h.inFlight(tds)) == 0, nil
				})
				break
			}
			delay := 200*time.Millisecond + time.Duration(rng.Int64N(int64(3*time.Second)))
			var active time.Time
			trigger := ""
			h.until("kill point "+strconv.Itoa(k+1)+" of round "+strconv.Itoa(round)+h.status(tds), running, func() (bool, error) {
				if err := h.audit.poll(); err != nil {
					return false, err
				}
				if len(h.inFlight(tds)) == 0 {
					return true, nil
				}
				// A kill point falls where this manager has begun to
				// work, not in its start-up.
				if active.IsZero() && writesTo(h.audit.since(mgr.start), clusters, users) > 0 {
					active = time.Now()
				}
				if active.IsZero() {
					return false, nil
				}
				if n := writesTo(h.audit.since(mark), clusters, users); n >= thresholds[k] {
					trigger = fmt.Sprintf("after the round's write %d", n)
					return true, nil
				}
				if time.Since(active) >= delay {
					trigger = fmt.Sprintf("%v after the manager's first write", delay.Round(time.Millisecond))
					return true, nil
				}
				return false, nil
			})
			hit := h.inFlight(tds)
			if len(hit) == 0 {
				break
			}
			last := "none"
			if evs := h.audit.since(mgr.start); len(evs) > 0 {
				last = evs[len(evs)-1].String()
			}
			mgr.kill()
			kills++
			var where []string
			for _, td := range hit {
				points[td.strategy]++
				reason, _, _ := contentDeleteReason(h.ctx, h.cp.admin, td.cluster)
				where = append(where, td.cluster+" "+reason)
			}
			t.Logf("kill %d (round %d, pid %s) %s; last write: %s; in flight: %s", kills, round, mgr.pid(), trigger, last, strings.Join(where, ", "))
			mgr = h.start(operatorUser)
		}
		if err := h.audit.poll(); err != nil {
			t.Fatal(err)
		}
		span = max(writesTo(h.audit.since(mark), clusters, users), 20)
	}
	wg.Wait()
	mgr.stop()
	events := h.quiesce()
	t.Logf("%d kills, kill points per strategy %v, %d teardowns, %d manager runs, %d audit events, %v",
		kills, points, len(all), h.runs, len(events), time.Since(began).Round(time.Second))
	records, err := readOutcomes(h.ctx, h.cp.admin, all)
	if err != nil {
		t.Fatal(err)
	}
	report(t, checkTeardowns(events, h.witness, all, []string{bystander[0].cluster}, users))
	reportRecords(t, checkRecords(events, h.witness, all, records, users))
}
