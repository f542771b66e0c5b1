package main

import (
	"errors"
	"io"
	"syscall"
)

// stopOnBrokenPipe writes to w; once a write finds the reader of the pipe
// gone (`run-local | tee run.log` ended by Ctrl-C), it calls stop, so the
// command stops its control plane instead of being killed by SIGPIPE with
// its processes left running. main asks for SIGPIPE, so that such a write
// returns EPIPE rather than killing the process.
type stopOnBrokenPipe struct {
	w    io.Writer
	stop func()
}

func (s stopOnBrokenPipe) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		s.stop()
	}
	return n, err
}
