//go:build unix

package shell

import (
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/tool"
)

// Programs that run other programs are refused unless the spec names
// them in allow_exec; find is allowed without its -exec and the like.
func TestExecCapablePrograms(t *testing.T) {
	plain, _ := newTool(t, Options{Allow: []string{"find", "echo", "split", "sort", "date"}})
	marked, _ := newTool(t, Options{Allow: []string{"find", "env", "sh"}, AllowExec: []string{"find", "env", "sh"}})
	for _, tc := range []struct {
		name    string
		tl      tool.Tool
		args    string
		errType string
	}{
		{"find", plain, `{"argv": ["find", "sub", "-name", "f.txt"]}`, ""},
		{"find -exec", plain, `{"argv": ["find", ".", "-exec", "sh", "-c", "id", ";"]}`, "policy_violation"},
		{"find -execdir", plain, `{"argv": ["find", ".", "-execdir", "id", ";"]}`, "policy_violation"},
		{"find -ok", plain, `{"argv": ["find", ".", "-ok", "id", ";"]}`, "policy_violation"},
		{"find -delete", plain, `{"argv": ["find", "sub", "-delete"]}`, "policy_violation"},
		{"env sh -c, not allowed", plain, `{"argv": ["env", "sh", "-c", "id"]}`, "policy_violation"},
		// Contained programs whose options run a shell, in every spelling.
		{"split --filter", plain, `{"argv": ["split", "--filter=id > pwned", "in"]}`, "policy_violation"},
		{"split --filter, apart", plain, `{"argv": ["split", "--filter", "id > pwned", "in"]}`, "policy_violation"},
		{"split --filter, abbreviated", plain, `{"argv": ["split", "--fil=id", "in"]}`, "policy_violation"},
		{"sort --compress-program", plain, `{"argv": ["sort", "--compress-program=sh", "in"]}`, "policy_violation"},
		{"sort --compress-program, abbreviated", plain, `{"argv": ["sort", "--compress-prog=sh", "in"]}`, "policy_violation"},
		{"date --set", plain, `{"argv": ["date", "--set=2000-01-01"]}`, "policy_violation"},
		{"find -exec, marked", marked, `{"argv": ["find", "sub", "-name", "f.txt", "-exec", "echo", "found", ";"]}`, ""},
		{"env sh -c, marked", marked, `{"argv": ["env", "sh", "-c", "echo ran"]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := run1(tc.tl, tc.args)
			var d *tool.ErrorDetails
			switch {
			case tc.errType != "":
				if !errors.As(err, &d) || d.Type != tc.errType {
					t.Errorf("%s: %+v, %v; want a %s error", tc.args, r, err, tc.errType)
				}
			case err != nil || r.ExitCode != 0:
				t.Errorf("%s: %+v, %v", tc.args, r, err)
			}
		})
	}
	// The spec's field, parsed strictly and named in errors.
	for _, tc := range []struct{ cfg, want string }{
		{`{"allow": ["xargs"], "dir": "."}`, "allow_exec"},
		{`{"allow": ["ls"], "allow_exec": ["sh"], "dir": "."}`, `allow_exec[0] "sh": not in allow`},
		{`{"allow": ["sh"], "allow_exec": "sh", "dir": "."}`, "allow_exec"},
		{`{"allow": ["sh"], "allow_execs": ["sh"], "dir": "."}`, "allow_execs"},
	} {
		if _, _, err := tool.OpenConnector("shell", json.RawMessage(tc.cfg), t.TempDir()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
	if _, _, err := tool.OpenConnector("shell", json.RawMessage(`{"allow": ["sh"], "allow_exec": ["sh"], "dir": "."}`), t.TempDir()); err != nil {
		t.Errorf("sh marked in allow_exec: %v", err)
	}
}

// A child that calls setsid leaves the process group, but not the call:
// when the call ends, by its timeout or by the program exiting, it is
// killed too.
func TestEscapedChildrenAreKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("descendants outside the process group are found through /proc")
	}
	tl, _ := newTool(t, Options{Allow: []string{"sh", "setsid", "env"}, AllowExec: []string{"sh", "setsid", "env"},
		Timeout: 700 * time.Millisecond})
	for _, tc := range []struct {
		name, marker, script string
		timedOut             bool
	}{
		{"at the timeout", uniqueMarker(2), "setsid sleep " + uniqueMarker(2) + " & sleep " + uniqueMarker(3), true},
		// setsid -f forks and returns at once: the child is orphaned
		// before the call could see it; it still carries the call's token.
		{"after the program exits", uniqueMarker(4), "setsid -f sleep " + uniqueMarker(4) + " >/dev/null 2>&1; exit 0", false},
		// A child that leaves the group, drops its environment and is
		// orphaned at once: only the PID namespace holds it.
		{"without the call's environment", uniqueMarker(5), "setsid -f env -i /bin/sleep " + uniqueMarker(5) + " >/dev/null 2>&1; exit 0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "without the call's environment" && !Contained() {
				t.Skip("this system gives programs no PID namespace of their own: the tracker may miss such a child (docs/tools.md)")
			}
			r, err := run1(tl, `{"argv": ["sh", "-c", "`+tc.script+`"]}`)
			if err != nil || r.TimedOut != tc.timedOut {
				t.Fatalf("result %+v, %v; want timed out %v", r, err, tc.timedOut)
			}
			if pids := outliving(tc.marker); len(pids) > 0 {
				t.Errorf("processes outlived the call: %v", pids)
				for _, p := range pids {
					if proc, err := os.FindProcess(p); err == nil {
						proc.Kill()
					}
				}
			}
		})
	}
}
