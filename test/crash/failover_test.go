package crash

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"

	"github.com/fleetops-dev/cleanup-operator/internal/testenv"
)

const (
	leaseNamespace = "cleanup-operator-system"
	leaseName      = v1alpha1.LeaderElectionID
)

// leaseWrite is a successful write of the leader-election Lease: who
// wrote it, and the holder it names.
type leaseWrite struct {
	user, holder string
}

func leaseWrites(events []auditEvent) []leaseWrite {
	var out []leaseWrite
	for _, e := range events {
		if e.resource() != "leases" || e.namespace() != leaseNamespace || !e.succeeded() || (e.Verb != "create" && e.Verb != "update") {
			continue
		}
		if m, err := e.response(); err == nil && m.Spec.HolderIdentity != nil {
			out = append(out, leaseWrite{user: e.User.Username, holder: *m.Spec.HolderIdentity})
		}
	}
	return out
}

// TestLeaderFailover runs two managers with leader election, kills the
// leader (found by the Lease's holderIdentity) at a random point of the
// teardowns of a Required and a Needless cluster, and checks that the other
// manager finishes them: in order, without deleting anything again, and
// without writing to them before it held the Lease.
func TestLeaderFailover(t *testing.T) {
	seed := seedFor(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	h := newHarness(t, seed, 3*time.Minute)
	users := []string{operatorUserA, operatorUserB}
	if err := h.cp.createNamespace(h.ctx, leaseNamespace); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}

	args := []string{"--leader-elect", "--leader-elect-namespace=" + leaseNamespace,
		// Quick, yet tolerant of a loaded machine: a leader that cannot
		// renew in time exits, and that fails the test.
		"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"}
	managers := map[string]*process{}
	for _, u := range users {
		managers[u] = h.start(u, args...)
	}
	defer func() {
		for _, p := range managers {
			if p != nil {
				p.kill()
			}
		}
	}()
	alive := func() []*process {
		var out []*process
		for _, p := range managers {
			if p != nil {
				out = append(out, p)
			}
		}
		return out
	}

	tds := h.fleet("failover", []v1alpha1.RemoveStrategyType{v1alpha1.RemoveStrategyRequired, v1alpha1.RemoveStrategyNeedless}, alive)
	clusters := map[string]bool{}
	for _, td := range tds {
		clusters[td.cluster] = true
	}

	// The leader: the user whose write put the Lease's holder there.
	lease := &coordinationv1.Lease{}
	if err := h.cp.admin.Get(h.ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, lease); err != nil {
		t.Fatal(err)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if err := h.audit.poll(); err != nil {
		t.Fatal(err)
	}
	leader := ""
	for _, w := range leaseWrites(h.audit.since(0)) {
		if w.holder == holder {
			leader = w.user
		}
	}
	if leader == "" {
		t.Fatalf("no audited Lease write names the holder %q", holder)
	}
	follower := users[0]
	if leader == follower {
		follower = users[1]
	}
	t.Logf("the leader is %s (%s), its pid %s", leader, holder, managers[leader].pid())

	// The kill point: after the leader's k-th deletion of the 42 the two
	// teardowns make (each: the add-ons in one collection, the signal work,
	// 18 works one by one and the namespace), and before the last few, so
	// that both managers delete. A namespace goes only after its works are
	// gone, which the agent takes longer than one poll to report, so the
	// teardowns cannot end within the poll that sees the kill point.
	var wg sync.WaitGroup
	mark := h.audit.len()
	deletions := 2 * (1 + 1 + 3*testenv.EnvInt(t, "CRASH_WORKS_PER_GROUP", worksPerGroup) + 1)
	killAt := 1 + rng.IntN(deletions-4)
	h.deleteClusters(tds, rng, &wg)
	leaderDeletes := func() (int, *auditEvent) {
		n, evs := 0, h.audit.since(mark)
		var last *auditEvent
		for i := range evs {
			deletion := evs[i].Verb == "delete" || evs[i].Verb == "deletecollection"
			if deletion && writesTo(evs[i:i+1], clusters, []string{leader}) > 0 {
				n, last = n+1, &evs[i]
			}
		}
		return n, last
	}
	n, last := 0, (*auditEvent)(nil)
	h.until(fmt.Sprintf("the leader's deletion %d", killAt), alive, func() (bool, error) {
		if err := h.audit.poll(); err != nil {
			return false, err
		}
		n, last = leaderDeletes()
		return n >= killAt || len(h.inFlight(tds)) == 0, nil
	})
	if len(h.inFlight(tds)) == 0 {
		t.Fatalf("the teardowns ended after the leader's deletion %d, before the kill point %d", n, killAt)
	}
	managers[leader].kill()
	managers[leader] = nil
	t.Logf("killed the leader after its deletion %d (%s); in flight:%s", n, last, h.status(h.inFlight(tds)))

	h.until("the teardowns end"+h.status(tds), alive, func() (bool, error) {
		return len(h.inFlight(tds)) == 0, nil
	})
	wg.Wait()
	managers[follower].stop()
	managers[follower] = nil
	events := h.quiesce()

	if _, err := readOutcomes(h.ctx, h.cp.admin, tds); err != nil {
		t.Fatal(err)
	}
	report(t, checkTeardowns(events, h.witness, tds, nil, users))
	// The follower wrote nothing to the teardowns before it held the
	// Lease: the API server received none of its writes before the write
	// that made it the holder. (Two instants of the API server's clock:
	// the follower's controllers start only after that write returned.)
	var acquired *auditEvent
	for i := range events {
		e := &events[i]
		if e.User.Username != follower || e.resource() != "leases" || !e.succeeded() {
			continue
		}
		if m, err := e.response(); err == nil && m.Spec.HolderIdentity != nil && *m.Spec.HolderIdentity != "" {
			acquired = e
			break
		}
	}
	if acquired == nil {
		t.Fatalf("%s never held the Lease", follower)
	}
	deleted := map[string]int{}
	for i := range events {
		e := &events[i]
		if writesTo(events[i:i+1], clusters, users) == 0 {
			continue
		}
		if e.Verb == "delete" && e.succeeded() {
			deleted[e.User.Username]++
		}
		if e.User.Username == follower && e.RequestReceived.Before(&acquired.RequestReceived) {
			t.Errorf("%s wrote before it held the Lease (from %s): %s at %s", follower,
				acquired.RequestReceived.Format(time.RFC3339Nano), e, e.RequestReceived.Format(time.RFC3339Nano))
		}
	}
	t.Logf("deletes by the leader %s: %d, by %s after the failover: %d", leader, deleted[leader], follower, deleted[follower])
}
