package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultProgressInterval is how often, at most, a running step's progress
// is written on its object when nothing but its counts changed.
const DefaultProgressInterval = 5 * time.Second

// progress paces the writes of a step's progress: a status is written at
// once when its step changes (another reason, another stage), and while a
// step runs at most once per interval; a change held back is written by a
// requeue at the end of the interval, so the last progress is always
// written. It is memory only: after a restart the first change is written
// at once. The counts stay current in metrics meanwhile.
type progress struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last map[types.UID]progressMark
}

// progressMark is the step last written on an object, and when.
type progressMark struct {
	step string
	at   time.Time
}

func newProgress(interval time.Duration) *progress {
	return &progress{interval: interval, now: time.Now, last: map[types.UID]progressMark{}}
}

// hold says how long a write of step on the object waits: 0 to write now
// (another step than the last one written, none written by this process,
// or the interval passed), else the rest of the interval.
func (p *progress) hold(uid types.UID, step string) time.Duration {
	if p == nil || p.interval <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.last[uid]
	if !ok || m.step != step {
		return 0
	}
	return max(p.interval-p.now().Sub(m.at), 0)
}

// wrote records a write of step on the object.
func (p *progress) wrote(uid types.UID, step string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[uid] = progressMark{step: step, at: p.now()}
}

// forget drops an object whose steps ended.
func (p *progress) forget(uid types.UID) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, uid)
}
