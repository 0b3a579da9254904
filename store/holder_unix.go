//go:build unix

package store

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// processGone reports whether no process has pid (signal 0 probes), or
// the process is a zombie: it has exited, and its parent (a container's
// init that reaps late, or never) has not yet collected it.
func processGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat") // Linux: "PID (COMM) STATE …"
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')') // COMM may hold spaces and parentheses
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
