package controller

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// maxReapplies is how many times the operator re-applies a decision that
// another manager reverted before it stops writing that object.
const maxReapplies = decision.MaxReapplies

// applyGuard keeps the operator out of write wars. It counts the applies of
// one decision to one object: the decision is applied once and re-applied
// maxReapplies times when someone reverts it; then the operator stops
// writing the object and reports it as contested.
type applyGuard struct {
	mu      sync.Mutex
	applied map[types.UID]applyRecord
}

type applyRecord struct {
	decision  string
	count     int
	confirmed bool
	// failed is the error of the last apply, when it failed (refused by
	// an admission policy, say): then no one reverted it.
	failed error
}

// confirm reports, once per applied decision, that the object now carries
// it: the cache has caught up with the apply.
func (g *applyGuard) confirm(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.applied[uid]
	if !ok || r.count == 0 || r.confirmed {
		return false
	}
	r.confirmed = true
	g.applied[uid] = r
	return true
}

// mayApply records an apply of decision to obj and says whether to make it.
func (g *applyGuard) mayApply(obj client.Object, decision string, recorder events.EventRecorder, action, field string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.applied == nil {
		g.applied = map[types.UID]applyRecord{}
	}
	r := g.applied[obj.GetUID()]
	if r.decision != decision {
		r = applyRecord{decision: decision}
	}
	r.count++
	r.confirmed = false
	g.applied[obj.GetUID()] = r
	if r.count == maxReapplies+2 {
		why := fmt.Sprintf("another manager reverted %s %d times", field, maxReapplies)
		if r.failed != nil {
			why = fmt.Sprintf("writing %s failed %d times (the last: %v)", field, maxReapplies+1, r.failed)
		}
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Contested", action, "%s",
			why+"; the operator stops writing this object: set the value where the object is generated, or change the CleanupPolicy so it does not decide for it")
	}
	return r.count <= maxReapplies+1
}

// outcome keeps the error of the apply mayApply allowed last, nil when
// it was written.
func (g *applyGuard) outcome(uid types.UID, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.applied[uid]; ok {
		r.failed = err
		g.applied[uid] = r
	}
}

// has says whether an apply to the object is counted.
func (g *applyGuard) has(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.applied[uid]
	return ok
}

// forget drops what was counted for an object that is going away.
func (g *applyGuard) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.applied, uid)
}
