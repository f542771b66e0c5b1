package teardown

import (
	"time"
)

// DefaultProgressInterval is how often, at most, a running step's progress
// is written on its object when nothing but its counts changed.
const DefaultProgressInterval = 5 * time.Second

// progress paces the writes of a teardown's progress: at most once per
// interval while it runs, whether its step or only its counts changed; a
// change held back is written by a requeue at the end of the interval, so
// the last progress is always written. It is memory only: after a restart
// the first change is written at once. The counts stay current in metrics
// meanwhile.
type progress struct {
	interval time.Duration
	now      func() time.Time
}

// progressMark is the step last written on an object, and when, and
// whether it showed the teardown running; each teardown's state keeps its
// own.
type progressMark struct {
	step    string
	at      time.Time
	running bool
}

func newProgress(interval time.Duration) *progress {
	return &progress{interval: interval, now: time.Now}
}

// hold says how long a write of step on the object whose last write is
// last waits: 0 to write now (another step than the last one written, none
// written by this process, or the interval passed), else the rest of the
// interval.
func (p *progress) hold(last *progressMark, step string) time.Duration {
	if last == nil || last.step != step {
		return 0
	}
	return p.wait(last)
}

// wait says how long any write on the object whose last write is last
// waits: 0 when none was written by this process or the interval passed,
// else the rest of the interval.
func (p *progress) wait(last *progressMark) time.Duration {
	if p == nil || p.interval <= 0 || last == nil {
		return 0
	}
	return max(p.interval-p.now().Sub(last.at), 0)
}

// mark is the mark of a write of step now.
func (p *progress) mark(step string, running bool) *progressMark {
	if p == nil {
		return nil
	}
	return &progressMark{step: step, at: p.now(), running: running}
}
