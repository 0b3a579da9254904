// Package shell provides the shell connector: the tool shell, which runs
// one program of an allowlist with its arguments (argv, never a shell
// command line), in a working directory, with a scrubbed environment, a
// timeout, and a cap on its output. Programs that run other programs
// (shells, env, xargs, interpreters, git, find -exec, …) are refused
// unless the configuration names them in allow_exec too; when a call
// ends, every process it started is killed, also one that left its
// process group. It contains which program starts, not what that
// program may do as agentry's user (docs/tools.md). It exists on Unix
// systems; it is off until a spec configures it ("connectors":
// {"shell": {"allow": [...], "dir": ...}}).
package shell
