package shell

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The sandbox confines a program the shell tool runs with Landlock: it
// reads and runs what the system's programs are made of (/usr, /bin,
// /lib...), reads and writes its working directory, and nothing else of
// the file system; it opens no TCP connection and binds no TCP port
// unless the spec allows the network; it signals no process and reaches
// no abstract unix socket outside the sandbox (Landlock ABI 6). Go cannot run code between fork and
// exec, so the tool starts its own program again (os.Executable) with
// the rules in sandboxVar: this package's init sees them, confines the
// thread, and execs the program there, which inherits the confinement.

// sandboxVar carries a confined run's rules to the program's own copy.
const sandboxVar = "AGENTRY_SHELL_SANDBOX"

// rules are what a confined program may reach.
type rules struct {
	Bin     string   `json:"bin"`  // the program to exec
	Argv    []string `json:"argv"` // its arguments, argv[0] included
	Dir     string   `json:"dir"`  // read and write
	Network bool     `json:"network,omitempty"`
}

// systemDirs are read and run: what programs and their libraries are.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives"}

// devices are read and written: what programs open as a matter of
// course. No terminal: a program given one could push input into it.
var devices = []string{"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"}

// landlockABI is the kernel's Landlock version, 0 when it has none.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// sandboxable says why a run cannot be confined here ("" when it can).
func sandboxable(network bool) string {
	abi := landlockABI()
	switch {
	case abi == 0:
		return "this kernel has no Landlock (Linux 5.13 or later, with landlock among its LSMs)"
	case abi < 4 && !network:
		return fmt.Sprintf("this kernel's Landlock (ABI %d) cannot keep a program off the network (ABI 4, Linux 6.7)", abi)
	}
	return ""
}

func init() {
	raw, ok := os.LookupEnv(sandboxVar)
	if !ok {
		return
	}
	// This process is a confined run's first step: it becomes the program.
	os.Unsetenv(sandboxVar)
	var r rules
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		fail("the sandbox's rules: %v", err)
	}
	runtime.LockOSThread() // the confinement is this thread's, and exec keeps it
	if err := confine(r); err != nil {
		fail("confining %s: %v", r.Bin, err)
	}
	env := os.Environ()
	err := syscall.Exec(r.Bin, r.Argv, env)
	fail("exec %s: %v", r.Bin, err)
}

// fail ends a confined run's first step, saying why, with the exit code
// of a program that could not run.
func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "agentry shell sandbox: "+format+"\n", a...)
	os.Exit(126)
}

// confine restricts this thread (and what it execs) to r.
func confine(r rules) error {
	abi := landlockABI()
	if abi == 0 {
		return fmt.Errorf("no Landlock in this kernel")
	}
	fs := uint64(ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir | ll.AccessFSRemoveDir |
		ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
		ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym)
	if abi >= 2 {
		fs |= ll.AccessFSRefer
	}
	if abi >= 3 {
		fs |= ll.AccessFSTruncate
	}
	if abi >= 5 {
		fs |= ll.AccessFSIoctlDev // no ioctl on a device it was not given
	}
	attr := ll.RulesetAttr{HandledAccessFS: fs}
	if abi >= 6 {
		// No signal to a process outside the sandbox (agentry among
		// them), no abstract unix socket outside it.
		attr.Scoped = ll.ScopeSignal | ll.ScopeAbstractUnixSocket
	}
	if abi >= 4 && !r.Network {
		attr.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP // no rule allows any port
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("create ruleset: %w", err)
	}
	defer unix.Close(fd)
	read := uint64(ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir)
	for _, p := range systemDirs {
		if err := allow(fd, p, read); err != nil {
			return err
		}
	}
	for _, p := range devices {
		if err := allow(fd, p, ll.AccessFSReadFile|ll.AccessFSWriteFile); err != nil {
			return err
		}
	}
	if err := allow(fd, r.Dir, fs); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return ll.LandlockRestrictSelf(fd, 0)
}

// allow adds a rule for the hierarchy at path, when it exists; a file
// gets only the rights a file can have.
func allow(ruleset int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil // no /lib64 on this system: nothing to allow
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate
	}
	return ll.LandlockAddPathBeneathRule(ruleset, &ll.PathBeneathAttr{AllowedAccess: access, ParentFd: fd}, 0)
}

// sandboxed returns the command that runs bin confined: this program
// again, with the rules in its environment.
func sandboxed(bin string, argv []string, dir string, network bool) (path string, args []string, env string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, "", fmt.Errorf("the sandbox starts this program again, whose path is unknown: %w", err)
	}
	b, err := json.Marshal(rules{Bin: bin, Argv: argv, Dir: dir, Network: network})
	if err != nil {
		return "", nil, "", err
	}
	return self, []string{self}, sandboxVar + "=" + string(b), nil
}
