package controller

import (
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

// WriteFailedReason is the reason of the Event on an object whose write
// failed: the API server refused it (an admission policy or webhook, most
// often) or did not answer.
const WriteFailedReason = "WriteFailed"

// applyGuard keeps the operator out of write wars. It counts the applies of
// one decision to one object: the decision is applied once and re-applied
// maxReapplies times when someone reverts it; then the operator stops
// writing the object and reports it as contested. A write the API server
// refused reverted nothing: it is not counted, and the reconcile that made
// it fails, so the write is tried again with the work queue's backoff.
type applyGuard struct {
	mu      sync.Mutex
	applied map[types.UID]applyRecord
}

type applyRecord struct {
	decision  string
	count     int
	confirmed bool
	// failed says the last write of the decision failed: reported once,
	// until a write of it lands or the decision changes.
	failed bool
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
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Contested", action,
			"another manager reverted %s %d times; the operator stops writing this object: set the value where the object is generated, or change the CleanupPolicy so it does not decide for it",
			field, maxReapplies)
	}
	return r.count <= maxReapplies+1
}

// outcome takes the result of the apply mayApply allowed last. A failed
// one is not counted, and is reported by a Warning Event the first time.
func (g *applyGuard) outcome(obj client.Object, err error, recorder events.EventRecorder, action, field, describe string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.applied[obj.GetUID()]
	if !ok {
		return
	}
	if err != nil {
		r.count--
		if !r.failed {
			recorder.Eventf(obj, nil, corev1.EventTypeWarning, WriteFailedReason, action,
				"writing %s %s failed; the operator tries again, less and less often, until the write lands or the decision changes: %v",
				field, describe, err)
		}
	}
	r.failed = err != nil
	g.applied[obj.GetUID()] = r
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
