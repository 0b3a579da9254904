//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that stopping it
// reaches the children it starts.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills cmd's process group (what the server left running);
// the SDK has already closed its stdin and reaped it. The kernel gives
// the group's number to no new process while a member of the group
// lives; with none left the kill finds nothing, unless in the moment
// since the reaping the number went to a new process that made itself a
// group leader.
func killGroup(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
