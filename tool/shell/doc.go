// Package shell provides the shell connector: the tool shell, which runs
// one program of an allowlist with its arguments (argv, never a shell
// command line), in a working directory, with a scrubbed environment, a
// timeout that kills the program's whole process group, and a cap on
// its output. It exists on Unix systems; it is off until a spec
// configures it ("connectors": {"shell": {"allow": [...], "dir": ...}}).
package shell
