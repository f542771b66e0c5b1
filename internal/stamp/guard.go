package stamp

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetops-dev/cleanup-operator/api/v1alpha1"
	"github.com/fleetops-dev/cleanup-operator/internal/decision"
)

// maxReapplies is how many times the operator re-applies a decision that
// another manager reverted before it stops writing that object.
const maxReapplies = decision.MaxReapplies

// applyGuard keeps the operator out of write wars. It counts the applies of
// one decision to one object: the decision is applied once and re-applied
// maxReapplies times when someone reverts it; then the operator stops
// writing the object and reports it as contested. A write the API server
// refused (refused) reverted nothing: it is not counted, and the reconcile
// that made it fails, so the write is tried again with the work queue's
// backoff. A write that failed otherwise (a timeout) may have landed: it
// is counted.
type applyGuard struct {
	mu      sync.Mutex
	applied map[types.UID]applyRecord
}

type applyRecord struct {
	decision  string
	count     int
	confirmed bool
	// failed is the error of the last apply, when it failed and may
	// have landed: then maybe no one reverted it.
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
			why = fmt.Sprintf("%s was re-applied %d times, the last write failing (%v)", field, maxReapplies, r.failed)
		}
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Contested", action, "%s",
			why+"; the operator stops writing this object: set the value where the object is generated, or change the CleanupPolicy so it does not decide for it")
	}
	return r.count <= maxReapplies+1
}

// outcome takes the result of the apply mayApply allowed last. A refused
// one is not counted, and a Warning Event says so each time (the recorder
// folds repeats into one Event's series).
func (g *applyGuard) outcome(obj client.Object, err error, recorder events.EventRecorder, action, field, describe string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.applied[obj.GetUID()]
	if !ok {
		return
	}
	r.failed = nil
	switch {
	case refused(err):
		r.count--
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha1.WriteFailedReason, action,
			"writing %s %s was refused; the operator tries again until the write lands or the decision changes: %v",
			field, describe, err)
	case err != nil:
		r.failed = err
	}
	g.applied[obj.GetUID()] = r
}

// refused says the API server refused a write, so it did not land: an
// admission policy or webhook (403, 422, 400), or too many requests (429).
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsTooManyRequests(err)
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
