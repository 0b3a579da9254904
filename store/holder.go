package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// processID names this process: host, machine (boot and pid namespace),
// pid and a random part (a pid is reused; the random part is not).
var processID = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	return host + "/" + machineID() + "/" + strconv.Itoa(os.Getpid()) + "/" + strconv.FormatUint(rand.Uint64()&0xffffffff, 36)
})

// machineID tells apart the places where a pid means the same process:
// the kernel's boot (two containers of one host name, or one machine
// rebooted, are different boots or namespaces) and the pid namespace
// (two containers of one kernel each have a pid 1). "?" when either is
// unknown: such a holder is never judged dead by its pid.
func machineID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "?"
	}
	ns, err := os.Readlink("/proc/self/ns/pid") // "pid:[4026531836]"
	if err != nil {
		return "?"
	}
	ns = strings.TrimSuffix(strings.TrimPrefix(ns, "pid:["), "]")
	return strings.ReplaceAll(strings.TrimSpace(string(boot)), "-", "") + "." + ns
}

var holders atomic.Uint64

// NewHolder returns a new lease holder of this process, distinct from
// every other: two sessions of one process are two holders. It names the
// host, the machine (boot and pid namespace) and the process, so that
// HolderDead can tell when it died.
func NewHolder() string {
	return processID() + "/" + strconv.FormatUint(holders.Add(1), 10)
}

// HolderDead reports whether holder is a process of this machine (same
// host, boot and pid namespace) that no longer exists: its runs are
// interrupted, whatever their leases say. A holder of another host,
// container or boot, or of a form NewHolder does not make, is never
// known dead: its lease's expiry tells.
func HolderDead(holder string) bool {
	parts := strings.Split(holder, "/")
	if len(parts) != 5 {
		return false
	}
	me := strings.Split(processID(), "/")
	pid, err := strconv.Atoi(parts[2])
	if parts[0] != me[0] || parts[1] != me[1] || parts[1] == "?" || err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return parts[3] != me[3] // an earlier process with this pid
	}
	return processGone(pid)
}

// KeepLease renews holder's lease of runID every ttl/3 until the returned
// stop is called (stop waits for a renewal under way to end). When the
// lease is lost to another holder it calls lost, if not nil, and stops
// renewing; a renewal that fails otherwise is tried again at the next
// tick. Between renewals nothing runs: a timer, not a goroutine, waits,
// so a server with a thousand runs under way keeps no thousand stacks
// for their leases.
func KeepLease(l Leases, runID, holder string, ttl time.Duration, lost func(error)) (stop func()) {
	k := &keeper{l: l, runID: runID, holder: holder, ttl: ttl, lost: lost}
	k.mu.Lock()
	k.t = time.AfterFunc(ttl/3, k.renew)
	k.mu.Unlock()
	return k.stop
}

// keeper is one KeepLease: its timer, and whether it has stopped.
type keeper struct {
	l             Leases
	runID, holder string
	ttl           time.Duration
	lost          func(error)

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	renewal sync.WaitGroup // a renewal under way; added to only before stopped
}

// renew is the timer's: it renews the lease and sets the next tick.
func (k *keeper) renew() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.renewal.Add(1)
	k.mu.Unlock()
	defer k.renewal.Done()
	if err := k.l.Renew(context.Background(), k.runID, k.holder, k.ttl); errors.Is(err, ErrLeaseLost) {
		k.mu.Lock()
		k.stopped = true
		k.mu.Unlock()
		if k.lost != nil {
			k.lost(err)
		}
		return
	}
	k.mu.Lock()
	if !k.stopped {
		k.t.Reset(k.ttl / 3)
	}
	k.mu.Unlock()
}

// stop ends the renewals; twice is harmless.
func (k *keeper) stop() {
	k.mu.Lock()
	k.stopped = true
	k.t.Stop()
	k.mu.Unlock()
	k.renewal.Wait()
}
