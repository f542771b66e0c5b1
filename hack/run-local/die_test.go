package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// asChild makes the test binary run main() instead of the tests: the
// tests below start it as run-local.
const asChild = "RUN_LOCAL_TEST_AS_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(asChild) == "1" {
		os.Args = os.Args[:1]
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// proc is a process by its ID and start time, which together do not name
// another process once it is gone.
type proc struct {
	pid   int
	comm  string
	start string
}

// stat reads the process's parent, state and start time from /proc.
func stat(pid int) (comm string, state byte, ppid int, start string, err error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, 0, "", err
	}
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[closing+1:]) // state ppid pgrp ... starttime is the 20th
	ppid, _ = strconv.Atoi(fields[1])
	return s[open+1 : closing], fields[0][0], ppid, fields[19], nil
}

// alive says whether p is still running: not gone, not a zombie.
func (p proc) alive() bool {
	_, state, _, start, err := stat(p.pid)
	return err == nil && start == p.start && state != 'Z'
}

// childrenOf lists the running children of pid named etcd,
// kube-apiserver or kube-controller-manager.
func childrenOf(pid int) []proc {
	entries, _ := os.ReadDir("/proc")
	var found []proc
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, state, ppid, start, err := stat(n)
		if err != nil || ppid != pid || state == 'Z' {
			continue
		}
		if slices.Contains([]string{"etcd", "kube-apiserver", "kube-controller"}, comm) {
			found = append(found, proc{pid: n, comm: comm, start: start})
		}
	}
	return found
}

// TestProcessesDieWithRunLocal starts run-local as `make run-local 2>&1 |
// tee run.log` does, waits until it says Ctrl-C stops it, ends it, and
// checks that etcd, kube-apiserver and kube-controller-manager it started
// are gone: when it is killed outright (SIGKILL), and when Ctrl-C reaches it
// after the reader of its output is gone (tee ended by the same Ctrl-C),
// where it must stop them itself and exit cleanly, as when its terminal
// closes (SIGHUP).
func TestProcessesDieWithRunLocal(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	for _, tc := range []struct {
		name       string
		closePipe  bool
		sig        syscall.Signal
		exitsClean bool
	}{
		{name: "SIGKILL", sig: syscall.SIGKILL},
		{name: "Ctrl-C with the pipe's reader gone", closePipe: true, sig: syscall.SIGINT, exitsClean: true},
		{name: "terminal closed (SIGHUP)", sig: syscall.SIGHUP, exitsClean: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, w, err := os.Pipe()
			g.Expect(err).NotTo(HaveOccurred())
			cmd := exec.Command(os.Args[0])
			// What a killed run-local cannot remove (etcd's data, the
			// certificates) goes where the test removes it.
			cmd.Env = append(os.Environ(), asChild+"=1", "TMPDIR="+t.TempDir())
			cmd.Stdout, cmd.Stderr = w, w
			// Its own process group, as a shell's job: Ctrl-C signals the group.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			g.Expect(cmd.Start()).To(Succeed())
			w.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var started []proc
			t.Cleanup(func() {
				// Whatever the outcome, leave nothing of this test running.
				_ = cmd.Process.Kill()
				for _, p := range started {
					if p.alive() {
						_ = syscall.Kill(p.pid, syscall.SIGKILL)
					}
				}
			})

			var log bytes.Buffer
			ready := make(chan struct{})
			copied := make(chan struct{})
			go func() {
				defer close(copied)
				sc := bufio.NewScanner(r)
				for sc.Scan() {
					fmt.Fprintln(&log, sc.Text())
					if strings.HasPrefix(sc.Text(), "Ctrl-C stops the operator") {
						close(ready)
						if tc.closePipe {
							r.Close() // as tee does when Ctrl-C ends it
							return
						}
					}
				}
				_, _ = io.Copy(&log, r)
			}()
			select {
			case <-ready:
			case err := <-exited:
				<-copied
				t.Fatalf("run-local exited: %v\n%s", err, log.String())
			case <-time.After(5 * time.Minute):
				t.Fatalf("run-local did not get ready:\n%s", log.String())
			}
			started = childrenOf(cmd.Process.Pid)
			comms := make([]string, 0, len(started))
			for _, p := range started {
				comms = append(comms, p.comm)
			}
			g.Expect(comms).To(ConsistOf("etcd", "kube-apiserver", "kube-controller"))

			g.Expect(syscall.Kill(-cmd.Process.Pid, tc.sig)).To(Succeed())
			var exitErr error
			g.Eventually(exited).WithTimeout(2 * time.Minute).Should(Receive(&exitErr))
			if tc.exitsClean {
				g.Expect(exitErr).NotTo(HaveOccurred(), "run-local did not stop cleanly")
			}
			for _, p := range started {
				g.Eventually(p.alive).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).
					Should(BeFalse(), "%s (pid %d) outlived run-local", p.comm, p.pid)
			}
		})
	}
}
