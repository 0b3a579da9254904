package shell

import (
	"fmt"
	"slices"
	"strings"
)

// contained are the programs the shell tool knows to run no other
// program, whatever their arguments but those execFlags names: a
// program of allow not on this list may run others (a shell, env, an
// interpreter, split --filter, sort --compress-program, git's hooks, a
// database client's shell escape…), so New refuses it unless the
// configuration names it in allow_exec too, as its explicit acceptance.
// An allowlist of programs known to be contained, not a denylist of
// those known not to be: a program nobody thought of is refused.
var contained = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`
		ls cat head tail wc grep egrep fgrep echo printf pwd date basename dirname realpath readlink
		stat file du df cut tr uniq nl od hexdump base64 base32 md5sum sha1sum sha224sum sha256sum
		sha384sum sha512sum b2sum cksum sum comm join paste fold fmt expand unexpand rev tac column
		true false seq sleep tree diff cmp jq sort split find cp mv rm mkdir rmdir touch ln chmod
		tee truncate shuf numfmt factor expr test id whoami uname nproc arch tty`) {
		contained[n] = true
	}
}

// execFlags are, for contained programs, the options that make them run
// other programs, or delete and write files beyond their arguments; a
// call with one is refused unless allow_exec names the program. A long
// option is refused also abbreviated (--compress-prog) or with its value
// (--filter=CMD), as GNU programs take it.
var execFlags = map[string][]string{
	"find":  {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"},
	"sort":  {"--compress-program"},
	"split": {"--filter"},
	"date":  {"-s", "--set"},
}

// checkAllow refuses an allowlist that lets a model run anything: a
// program not known to be contained, unless allowExec names it too.
func checkAllow(allow, allowExec []string) error {
	for i, p := range allowExec {
		if !slices.Contains(allow, p) {
			return fmt.Errorf("allow_exec[%d] %q: not in allow (allow_exec marks programs of allow that may run others)", i, p)
		}
	}
	for i, p := range allow {
		if !contained[p] && !slices.Contains(allowExec, p) {
			return fmt.Errorf("allow[%d] %q is not among the programs the shell tool knows to run no other program, "+
				"so it may run anything (a shell, an interpreter, a program's own escape to one); "+
				"name it in allow_exec too to accept that", i, p)
		}
	}
	return nil
}

// checkArgs refuses the options that make a contained program run
// others, unless allowExec names it.
func checkArgs(argv, allowExec []string) error {
	prog := argv[0]
	flags, ok := execFlags[prog]
	if !ok || slices.Contains(allowExec, prog) {
		return nil
	}
	for _, a := range argv[1:] {
		if a == "--" {
			return nil // what follows are operands
		}
		for _, f := range flags {
			if matchesFlag(a, f) {
				return fmt.Errorf("%s %s runs other programs or changes files; the connector's allow_exec does not name %s", prog, a, prog)
			}
		}
	}
	return nil
}

// matchesFlag reports whether the argument a is the option f: itself,
// with a value (--f=V), or, for a long option, abbreviated to a prefix
// of four characters or more (--fil for --filter).
func matchesFlag(a, f string) bool {
	name, _, _ := strings.Cut(a, "=")
	if name == f {
		return true
	}
	return strings.HasPrefix(f, "--") && len(name) >= 4 && strings.HasPrefix(name, "--") && strings.HasPrefix(f, name)
}
