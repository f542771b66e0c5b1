package controller_test

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
)

// logs keeps, while a spec listens, the lines the suite's components log,
// as the operator's own logger would have written them.
var logs = &logCapture{}

// capturedLine is one log line: its message, error and key-value pairs
// (those given by WithValues first).
type capturedLine struct {
	msg string
	err error
	kv  []any
}

// value is the line's value of key, nil when it has none.
func (l capturedLine) value(key string) any {
	for i := 0; i+1 < len(l.kv); i += 2 {
		if l.kv[i] == key {
			return l.kv[i+1]
		}
	}
	return nil
}

type logCapture struct {
	mu     sync.Mutex
	listen bool
	lines  []capturedLine
}

// wrap passes every line on to l and keeps it.
func (c *logCapture) wrap(l logr.Logger) logr.Logger {
	return logr.New(captureSink{LogSink: l.GetSink(), c: c})
}

func (c *logCapture) add(line capturedLine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listen {
		c.lines = append(c.lines, line)
	}
}

// start keeps the lines logged from now on, until the spec ends.
func (c *logCapture) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listen, c.lines = true, nil
	DeferCleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.listen, c.lines = false, nil
	})
}

// all is every line kept.
func (c *logCapture) all() []capturedLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lines)
}

// matching is the lines kept with the message msg whose key has the value
// want.
func (c *logCapture) matching(msg, key string, want any) []capturedLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capturedLine
	for _, l := range c.lines {
		if l.msg == msg && l.value(key) == want {
			out = append(out, l)
		}
	}
	return out
}

type captureSink struct {
	logr.LogSink
	c  *logCapture
	kv []any
}

func (s captureSink) Info(level int, msg string, kv ...any) {
	s.c.add(capturedLine{msg: msg, kv: append(slices.Clone(s.kv), kv...)})
	s.LogSink.Info(level, msg, kv...)
}

func (s captureSink) Error(err error, msg string, kv ...any) {
	s.c.add(capturedLine{msg: msg, err: err, kv: append(slices.Clone(s.kv), kv...)})
	s.LogSink.Error(err, msg, kv...)
}

func (s captureSink) WithValues(kv ...any) logr.LogSink {
	return captureSink{LogSink: s.LogSink.WithValues(kv...), c: s.c, kv: append(slices.Clone(s.kv), kv...)}
}

func (s captureSink) WithName(name string) logr.LogSink {
	return captureSink{LogSink: s.LogSink.WithName(name), c: s.c, kv: s.kv}
}
