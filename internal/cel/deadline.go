package cel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// joinWindow is how long one deadline context is handed out to the
// evaluations that start.
const joinWindow = 50 * time.Millisecond

// evalDeadlines bounds the evaluations of the process in time.
var evalDeadlines deadlines

// deadlines hands out the contexts that stop an evaluation after
// PerCallTimeout. Evaluations that start within one window of joinWindow
// share one context, whose deadline is PerCallTimeout after the window
// closes: each evaluation gets at least PerCallTimeout and at most
// PerCallTimeout+joinWindow, and the process arms one timer per window
// instead of one per evaluation.
type deadlines struct {
	mu      sync.Mutex
	current atomic.Pointer[deadlineWindow]
}

type deadlineWindow struct {
	ctx    context.Context
	cancel context.CancelFunc // released by the deadline's own timer
	closes time.Time
}

// context returns a context whose deadline is at least PerCallTimeout after now.
func (d *deadlines) context(now time.Time) context.Context {
	if w := d.current.Load(); w != nil && now.Before(w.closes) {
		return w.ctx
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.current.Load(); w != nil && now.Before(w.closes) {
		return w.ctx
	}
	closes := now.Add(joinWindow)
	ctx, cancel := context.WithDeadline(context.Background(), closes.Add(PerCallTimeout))
	d.current.Store(&deadlineWindow{ctx: ctx, cancel: cancel, closes: closes})
	return ctx
}
