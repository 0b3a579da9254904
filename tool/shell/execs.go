package shell

import (
	"fmt"
	"slices"
	"strings"
)

// runsOthers are programs that run other programs, whatever their
// arguments, with why: allowing one allows anything, so New refuses it
// unless the configuration names it in AllowExec too. The list is of
// programs commonly installed; a program it does not know is taken as
// it is.
var runsOthers = map[string]string{}

func init() {
	for reason, names := range map[string]string{
		"a shell": "sh bash dash zsh ksh mksh csh tcsh fish busybox toybox",
		"it runs the program its arguments name": "env xargs nice nohup timeout time stdbuf setsid sudo su doas runuser " +
			"chroot unshare nsenter ionice taskset chrt flock watch strace ltrace gdb script parallel systemd-run",
		"an interpreter: its arguments are a program": "python perl ruby node nodejs deno bun php lua luajit tclsh wish " +
			"expect Rscript julia awk gawk mawk nawk sed ed ex vi vim nvim emacs",
		"a pager or viewer whose commands run a shell":                                         "less more man",
		"it runs a Makefile's recipes":                                                         "make gmake",
		"it runs programs its config, aliases and hooks name, and those of -c and --exec-path": "git",
		"it runs commands on other hosts, or a program given with -e or -S":                    "ssh scp sftp rsync",
		"it runs programs through --to-command, -I and checkpoint actions":                     "tar",
		"it runs containers, or commands in them":                                              "docker podman kubectl",
		"it runs install and build scripts":                                                    "npm npx pip go cargo",
	} {
		for _, n := range strings.Fields(names) {
			runsOthers[n] = reason
		}
	}
}

// execFlags are, for programs useful without them, the arguments that
// make them run other programs or delete and write files; a call with
// one is refused unless AllowExec names the program.
var execFlags = map[string][]string{
	"find": {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"},
}

// baseName is prog without a version suffix: python3.12 is python.
func baseName(prog string) string {
	return strings.TrimRight(prog, "0123456789.")
}

// checkAllow refuses an allowlist that lets a model run anything: a
// program that runs others, unless allowExec names it too.
func checkAllow(allow, allowExec []string) error {
	for i, p := range allowExec {
		if !slices.Contains(allow, p) {
			return fmt.Errorf("allow_exec[%d] %q: not in allow (allow_exec marks programs of allow that may run others)", i, p)
		}
	}
	for i, p := range allow {
		if why, ok := runsOthers[baseName(p)]; ok && !slices.Contains(allowExec, p) {
			return fmt.Errorf("allow[%d] %q runs other programs (%s), which the shell tool cannot contain; "+
				"name it in allow_exec too to accept that", i, p, why)
		}
	}
	return nil
}

// checkArgs refuses the arguments that make an allowed program run
// others, unless allowExec names it.
func checkArgs(argv, allowExec []string) error {
	prog := argv[0]
	flags, ok := execFlags[prog]
	if !ok || slices.Contains(allowExec, prog) {
		return nil
	}
	for _, a := range argv[1:] {
		if slices.Contains(flags, a) {
			return fmt.Errorf("%s %s runs other programs or changes files; the connector's allow_exec does not name %s", prog, a, prog)
		}
	}
	return nil
}
