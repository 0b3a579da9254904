//go:build unix && !linux

package shell

import (
	"sync"
	"syscall"
)

// procAttr puts the program in a process group of its own.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Contained reports whether programs run in a PID namespace of their
// own: never here, where only the process group is killed.
func Contained() bool { return false }

// tracker kills the program's process group: without /proc, a process
// that left the group (setsid) is not found.
type tracker struct {
	mu   sync.Mutex
	root int
}

func newTracker(string) *tracker { return &tracker{} }

func (t *tracker) begin(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.root = pid
}

func (t *tracker) kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.root > 0 {
		syscall.Kill(-t.root, syscall.SIGKILL)
	}
}

func (t *tracker) close() { t.kill() }
