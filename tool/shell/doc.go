// Package shell provides the shell connector: the tool shell, which runs
// one program of an allowlist with its arguments (argv, never a shell
// command line), in a working directory, with a scrubbed environment, a
// timeout, and a cap on its output. Only programs known to run no other
// program are taken as they are (ls, grep, find without -exec, …); any
// other is refused unless the configuration names it in allow_exec too.
// On Linux a call runs in a PID namespace of its own, so that when it
// ends every process it started is killed, also one that left its
// process group (see Contained). It contains which program starts, not what that
// program may do as agentry's user (docs/tools.md). It exists on Unix
// systems; it is off until a spec configures it ("connectors":
// {"shell": {"allow": [...], "dir": ...}}).
package shell
