//go:build linux

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// The control plane's processes die with the process that started them,
// even when it is killed (SIGKILL, or SIGPIPE once the reader of its output
// is gone): the kernel sends them SIGKILL when their parent dies (the
// parent-death signal, prctl(2) PR_SET_PDEATHSIG).
//
// envtest starts etcd and kube-apiserver itself and offers no way to set
// their SysProcAttr. So it starts them through links to this executable in
// a directory of their own, with a marker file naming the real binaries'
// directory and this process: started through such a link, this executable
// sets its parent-death signal and executes the real binary, which keeps it.
//
// The signal is sent when the *thread* that started the process ends, not
// the process: every process is started on one goroutine locked to its
// thread for the life of the process (onParentThread), so that thread
// never ends before the process.

// parentDeathMarker is the file, next to the links, that holds the real
// binaries' directory and the parent's process ID, one a line.
const parentDeathMarker = ".die-with-parent"

// The names of the binaries started through the links.
var parentDeathBinaries = []string{"etcd", "kube-apiserver"}

func init() { execWithParentDeathSignal() }

// execWithParentDeathSignal becomes the real binary, with a parent-death
// signal, when this executable was started through a link of
// linkParentDeath; otherwise it returns.
func execWithParentDeathSignal() {
	name := filepath.Base(os.Args[0])
	if !isParentDeathBinary(name) {
		return
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), parentDeathMarker))
	if err != nil {
		return
	}
	dir, parent, ok := strings.Cut(strings.TrimSpace(string(raw)), "\n")
	if !ok {
		return
	}
	// The signal belongs to the thread that executes the binary.
	runtime.LockOSThread()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "%s: setting the parent-death signal: %v\n", name, errno)
		os.Exit(1)
	}
	if strconv.Itoa(os.Getppid()) != parent {
		os.Exit(1) // the parent died before the signal was set
	}
	bin := filepath.Join(dir, name)
	err = syscall.Exec(bin, append([]string{bin}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "executing %s: %v\n", bin, err)
	os.Exit(127)
}

func isParentDeathBinary(name string) bool {
	for _, b := range parentDeathBinaries {
		if name == b {
			return true
		}
	}
	return false
}

// linkParentDeath makes a directory of links to this executable, one for
// each of etcd and kube-apiserver, that run binDir's binary of that name
// with a parent-death signal. The caller removes the directory.
func linkParentDeath(binDir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	binDir, err = filepath.Abs(binDir)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "cleanup-testenv-bin-")
	if err != nil {
		return "", err
	}
	marker := binDir + "\n" + strconv.Itoa(os.Getpid()) + "\n"
	if err := os.WriteFile(filepath.Join(dir, parentDeathMarker), []byte(marker), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	for _, name := range parentDeathBinaries {
		if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// setParentDeath gives a process that cmd starts the parent-death signal.
// Start it with onParentThread.
func setParentDeath(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
