package testenv

import (
	"runtime"
	"sync"
)

// parentThread is a goroutine locked to its OS thread for the life of the
// process: the processes it starts have a parent thread that does not end
// before the process (see parentdeath_linux.go).
var parentThread struct {
	once sync.Once
	work chan func()
}

// onParentThread runs f on parentThread and returns when f does; a panic in
// f panics here. f must not call onParentThread.
func onParentThread(f func()) {
	parentThread.once.Do(func() {
		parentThread.work = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range parentThread.work {
				f()
			}
		}()
	})
	var panicked any
	done := make(chan struct{})
	parentThread.work <- func() {
		defer close(done)
		defer func() { panicked = recover() }()
		f()
	}
	<-done
	if panicked != nil {
		panic(panicked)
	}
}
