package crash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
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

// seedFor returns CRASH_SEED, or a new seed, and prints it.
func seedFor(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CRASH_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d; replay: CRASH_SEED=%d go test ./test/crash/ -count=1 -v -run '^%s$'", seed, seed, t.Name())
		}
	})
	return seed
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// writesTo counts the operator's writes to the clusters of a round and to
// their namespaces' content: the teardowns' progress.
func writesTo(events []auditEvent, clusters map[string]bool, users []string) int {
	n := 0
	for i := range events {
		e := &events[i]
		if !slices.Contains(users, e.User.Username) {
			continue
		}
		if clusters[e.namespace()] || (e.namespace() == "" && clusters[e.name()] && (e.resource() == "managedclusters" || e.resource() == "namespaces")) {
			n++
		}
	}
	return n
}

// harness is what a test runs: the control plane, the witness, the agent,
// the audit log and the managers' log.
type harness struct {
	t       *testing.T
	cp      *controlPlane
	bin     string
	ctx     context.Context
	witness *witness
	audit   *auditLog
	agent   *agent
	log     *os.File
	logPath string
	runs    int
}

func newHarness(t *testing.T, seed uint64, deadline time.Duration) *harness {
	cp, bin := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	if err := createPolicies(ctx, cp.admin); err != nil {
		t.Fatal(err)
	}
	w, err := watchRemovals(ctx, cp.dyn)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cp: cp, bin: bin, ctx: ctx, witness: w, audit: &auditLog{path: cp.auditLog}, agent: newAgent(cp.agent, seed)}
	go h.agent.run(ctx)
	h.logPath = filepath.Join(cp.dir, strings.ToLower(t.Name())+"-managers.log")
	if h.log, err = os.Create(h.logPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.log.Close()
		if t.Failed() {
			h.tail(60)
		}
	})
	return h
}

// tail prints the end of the managers' log.
func (h *harness) tail(lines int) {
	raw, err := os.ReadFile(h.logPath)
	if err != nil {
		return
	}
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	h.t.Logf("the managers' log ends with:\n%s", strings.Join(all, "\n"))
}

func (h *harness) start(user string, args ...string) *process {
	h.t.Helper()
	if err := h.audit.poll(); err != nil {
		h.t.Fatal(err)
	}
	h.runs++
	p, err := startManager(h.cp, h.bin, fmt.Sprintf("manager run %d as %s", h.runs, user), user, h.log, h.audit.len(), args...)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// fleet creates a cluster of each given strategy and waits until the
// operator governs them all.
func (h *harness) fleet(prefix string, ss []v1alpha1.RemoveStrategyType, running func() []*process) []*teardown {
	h.t.Helper()
	var tds []*teardown
	for _, s := range ss {
		td, err := createCluster(h.ctx, h.cp.admin, prefix+"-"+strings.ToLower(string(s)), s, addonsPerCluster, worksPerGroup)
		if err != nil {
			h.t.Fatal(err)
		}
		tds = append(tds, td)
	}
	for _, td := range tds {
		h.until(fmt.Sprintf("the operator governs %s", td.cluster), running, func() (bool, error) {
			return governed(h.ctx, h.cp.admin, td.cluster)
		})
		// Stamped and applied before the teardown: an unavailable
		// cluster's agent would never confirm a stamp made after.
		h.until(fmt.Sprintf("the works of %s are stamped SelectivelyOrphan and applied", td.cluster), running, func() (bool, error) {
			return settled(h.ctx, h.cp.admin, td.cluster)
		})
	}
	return tds
}

// until polls cond until it holds, failing the test at the harness's
// deadline or when a manager exits on its own.
func (h *harness) until(what string, running func() []*process, cond func() (bool, error)) {
	h.t.Helper()
	for {
		ok, err := cond()
		if err != nil {
			h.t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		for _, p := range running() {
			if p.exited() {
				h.t.Fatalf("%s: %s exited on its own: %v", what, p.name, p.err)
			}
		}
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("%s: not by the test's deadline", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deleteClusters makes the BestEffort clusters unavailable (their agent
// gone), deletes the clusters, and removes each monitored ConfigMap once
// the teardown waits for it, after a delay drawn from rng.
func (h *harness) deleteClusters(tds []*teardown, rng *rand.Rand, wg *sync.WaitGroup) {
	h.t.Helper()
	for _, td := range tds {
		if td.strategy == v1alpha1.RemoveStrategyBestEffort {
			h.agent.setOffline(td.cluster)
			if err := setAvailable(h.ctx, h.cp.admin, td.cluster, metav1.ConditionUnknown); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	for _, td := range tds {
		mc := &unstructured.Unstructured{}
		mc.SetAPIVersion("cluster.open-cluster-management.io/v1")
		mc.SetKind("ManagedCluster")
		mc.SetName(td.cluster)
		if err := h.cp.admin.Delete(h.ctx, mc); err != nil {
			h.t.Fatal(err)
		}
		delay := time.Duration(rng.Int64N(int64(time.Second)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.removeMonitoredWhenGated(td.cluster, delay)
		}()
	}
}

// removeMonitoredWhenGated deletes the monitored ConfigMap, as its own
// controller would, once the teardown reports that it waits for it.
func (h *harness) removeMonitoredWhenGated(cluster string, delay time.Duration) {
	for h.ctx.Err() == nil {
		if _, gone := h.witness.removed(objectKey{"managedclusters", "", cluster}); gone {
			return
		}
		reason, _, err := contentDeleteReason(h.ctx, h.cp.admin, cluster)
		if err == nil && strings.HasPrefix(reason, v1alpha1.WaitingForMonitoredResourcesReason+"/") {
			time.Sleep(delay)
			cm := &corev1.ConfigMap{}
			cm.Namespace, cm.Name = cluster, monitored
			if err := h.cp.admin.Delete(h.ctx, cm); client.IgnoreNotFound(err) != nil {
				h.t.Errorf("removing the monitored ConfigMap of %s: %v", cluster, err)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (h *harness) inFlight(tds []*teardown) []*teardown {
	var out []*teardown
	for _, td := range tds {
		if _, gone := h.witness.removed(objectKey{"managedclusters", "", td.cluster}); !gone {
			out = append(out, td)
		}
	}
	return out
}

// quiesce reads the audit log until it stops growing.
func (h *harness) quiesce() []auditEvent {
	h.t.Helper()
	n := -1
	for n != h.audit.len() {
		n = h.audit.len()
		time.Sleep(500 * time.Millisecond)
		if err := h.audit.poll(); err != nil {
			h.t.Fatal(err)
		}
	}
	return h.audit.since(0)
}

func (h *harness) status(tds []*teardown) string {
	var b strings.Builder
	for _, td := range tds {
		reason, message, err := contentDeleteReason(h.ctx, h.cp.admin, td.cluster)
		fmt.Fprintf(&b, "\n  %s (%s): %s %s %v", td.cluster, td.strategy, reason, message, err)
	}
	return b.String()
}

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
	minPoints := envInt(t, "CRASH_KILL_POINTS", 20)
	rng := rand.New(rand.NewPCG(seed, 1))
	h := newHarness(t, seed, 6*time.Minute)
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
	report(t, checkTeardowns(events, h.witness, all, []string{bystander[0].cluster}, users))
}
