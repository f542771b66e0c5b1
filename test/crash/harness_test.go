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

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
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
		td, err := createCluster(h.ctx, h.cp.admin, prefix+"-"+strings.ToLower(string(s)), s,
			testenv.EnvInt(h.t, "CRASH_ADDONS", addonsPerCluster), testenv.EnvInt(h.t, "CRASH_WORKS_PER_GROUP", worksPerGroup))
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
			if err := testenv.SetAvailable(h.ctx, h.cp.admin, td.cluster, metav1.ConditionUnknown); err != nil {
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
