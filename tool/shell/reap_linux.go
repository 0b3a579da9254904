//go:build linux

package shell

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procAttr puts the program in a process group of its own, has the
// kernel kill it if agentry's thread that started it dies and, where
// the system allows it, makes it the first process of a PID namespace of
// its own: when it ends, or is killed, the kernel kills every process
// in the namespace, whatever they did to leave (setsid, a double fork,
// a scrubbed environment). Elsewhere the tracker finds them.
func procAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if Contained() {
		namespace(a)
	}
	return a
}

// namespace gives a a PID namespace, and a user namespace that maps the
// process's own ids when it is not root (which may make a PID namespace
// without one).
func namespace(a *syscall.SysProcAttr) {
	a.Cloneflags = syscall.CLONE_NEWPID
	if uid := os.Getuid(); uid != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		gid := os.Getgid()
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
}

// Contained reports whether programs run in a PID namespace of their
// own here, so that nothing they start outlives them; found once, by
// starting true in one. Without (no user namespaces for this user, or a
// sandbox that forbids them), descendants are tracked through /proc, and
// one that leaves its process group and drops its environment before
// the tracker sees it escapes.
func Contained() bool { return inNamespace() }

var inNamespace = sync.OnceValue(func() bool {
	bin, err := lookPath("true")
	if err != nil {
		return false
	}
	a := &syscall.SysProcAttr{}
	namespace(a)
	p, err := os.StartProcess(bin, []string{"true"}, &os.ProcAttr{Sys: a})
	if err != nil {
		return false
	}
	st, err := p.Wait()
	return err == nil && st.Success()
})

// pollEvery is how often a running program's descendants are recorded.
const pollEvery = 50 * time.Millisecond

// tracker finds every process a program started, including those that
// left its process group (setsid) and those orphaned to init: it records
// the program's descendants from /proc while it runs (a process keeps
// its place once recorded, even when its parent dies), and at the end
// also takes every process whose environment carries the call's token.
type tracker struct {
	root, self int
	token      string // tokenVar's value in the program's environment
	mu         sync.Mutex
	seen       map[int]uint64 // pid → start time, which tells a reused pid apart
	stop, done chan struct{}
}

type proc struct {
	ppid  int
	start uint64
	state byte
}

func newTracker(token string) *tracker {
	return &tracker{self: os.Getpid(), token: token, seen: map[int]uint64{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

// begin starts recording the descendants of the program, pid.
func (t *tracker) begin(pid int) {
	t.mu.Lock()
	t.root = pid
	t.mu.Unlock()
	go t.poll()
}

func (t *tracker) poll() {
	defer close(t.done)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		t.mu.Lock()
		t.record(readProcs(), false)
		t.mu.Unlock()
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
	}
}

// record adds to seen every live process of procs that descends from
// the program (or, with tokens, carries its token), and returns them.
func (t *tracker) record(procs map[int]proc, tokens bool) []int {
	var found []int
	for pid, p := range procs {
		if pid == t.self || p.state == 'Z' {
			continue
		}
		if t.descends(pid, procs) || tokens && hasToken(pid, t.token) {
			t.seen[pid] = p.start
			found = append(found, pid)
		}
	}
	return found
}

func (t *tracker) descends(pid int, procs map[int]proc) bool {
	for range 128 { // deeper than any real process tree; a bound against a cycle read mid-change
		p, ok := procs[pid]
		if !ok || pid <= 1 {
			return false
		}
		if start, ok := t.seen[pid]; t.root > 0 && pid == t.root || ok && start == p.start {
			return true
		}
		pid = p.ppid
	}
	return false
}

// kill kills the program's process group and every process found as
// its own, in rounds until a round finds none (a process may fork while
// the one before is killed).
func (t *tracker) kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.root > 0 {
		syscall.Kill(-t.root, syscall.SIGKILL)
	}
	for range 20 {
		found := t.record(readProcs(), true)
		if len(found) == 0 {
			return
		}
		for _, pid := range found {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// close stops the polling and kills what is left.
func (t *tracker) close() {
	t.mu.Lock()
	began := t.root > 0
	t.mu.Unlock()
	if began {
		close(t.stop)
		<-t.done
	}
	t.kill()
}

// readProcs reads the parent, start time and state of every process.
func readProcs() map[int]proc {
	out := map[int]proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session … starttime: comm may hold
		// spaces and parentheses, so the fields are counted after the last ).
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		start, _ := strconv.ParseUint(f[19], 10, 64)
		out[pid] = proc{ppid: ppid, start: start, state: f[0][0]}
	}
	return out
}

func hasToken(pid int, token string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return bytes.Contains(append([]byte{0}, env...), []byte("\x00"+tokenVar+"="+token+"\x00"))
}
