//go:build unix

package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newTool(t *testing.T, o Options) (tool.Tool, string) {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o750)
	os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("inside"), 0o600)
	os.Symlink("/etc", filepath.Join(dir, "etc-link"))
	if o.Dir == "" {
		o.Dir = dir
	}
	tl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tl, dir
}

func run1(tl tool.Tool, args string) (*Result, error) {
	out, err := tl.Call(context.Background(), json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	var r Result
	return &r, json.Unmarshal(out, &r)
}

func TestShell(t *testing.T) {
	t.Setenv("AGENTRY_CANARY_SECRET", "do-not-pass-me")
	tl, _ := newTool(t, Options{Allow: []string{"echo", "cat", "pwd", "env", "sh", "ls"}, AllowExec: []string{"env", "sh"},
		Timeout: 2 * time.Second, MaxOutput: 32})
	for _, tc := range []struct {
		name, args, stdout, errType string
	}{
		{"a program", `{"argv": ["echo", "hello"]}`, "hello\n", ""},
		{"no shell: ; is an argument", `{"argv": ["echo", "a; cat /etc/passwd"]}`, "a; cat /etc/passwd\n", ""},
		{"no shell: $( ) is an argument", `{"argv": ["echo", "$(id)"]}`, "$(id)\n", ""},
		{"no shell: variables are not expanded", `{"argv": ["echo", "$HOME"]}`, "$HOME\n", ""},
		{"a dir under the root", `{"argv": ["cat", "f.txt"], "dir": "sub"}`, "inside", ""},
		{"off the allowlist", `{"argv": ["rm", "-rf", "/"]}`, "", "policy_violation"},
		{"a path as the program", `{"argv": ["/bin/echo", "x"]}`, "", "policy_violation"},
		{"dot-dot as the program", `{"argv": ["../echo"]}`, "", "policy_violation"},
		{"a dir with ..", `{"argv": ["ls"], "dir": "../.."}`, "", "invalid_arguments"},
		{"an absolute dir", `{"argv": ["ls"], "dir": "/etc"}`, "", "invalid_arguments"},
		{"a dir through a link out", `{"argv": ["ls"], "dir": "etc-link"}`, "", "invalid_arguments"},
		{"empty argv", `{"argv": []}`, "", "invalid_arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := run1(tl, tc.args)
			if tc.errType != "" {
				var d *tool.ErrorDetails
				if !errors.As(err, &d) || d.Type != tc.errType {
					t.Errorf("%s: %v; want a %s error", tc.args, err, tc.errType)
				}
				return
			}
			if err != nil || r.Stdout != tc.stdout || r.ExitCode != 0 {
				t.Errorf("%s: %+v, %v; want stdout %q", tc.args, r, err, tc.stdout)
			}
		})
	}
	r, err := run1(tl, `{"argv": ["env"]}`)
	if err != nil || strings.Contains(r.Stdout, "do-not-pass-me") || !strings.Contains(r.Stdout, "PATH=") {
		t.Errorf("env: %+v %v; want a scrubbed environment", r, err)
	}
	r, _ = run1(tl, `{"argv": ["echo", "`+strings.Repeat("z", 100)+`"]}`)
	if !r.Truncated || len(r.Stdout) != 32 {
		t.Errorf("output over the cap: %d bytes, truncated %v", len(r.Stdout), r.Truncated)
	}
	r, _ = run1(tl, `{"argv": ["sh", "-c", "exit 3"]}`)
	if r.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", r.ExitCode)
	}
}

// A program that starts children which outlive it (a small fork bomb) is
// cut at the timeout with its whole process group.
func TestTimeoutKillsTheGroup(t *testing.T) {
	tl, _ := newTool(t, Options{Allow: []string{"sh"}, AllowExec: []string{"sh"}, Timeout: 500 * time.Millisecond})
	marker := uniqueMarker(1)
	r, err := run1(tl, `{"argv": ["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do (sleep `+marker+` &); done; sleep `+marker+`"]}`)
	if err != nil || !r.TimedOut || r.ExitCode != -1 {
		t.Fatalf("result %+v, %v; want timed out", r, err)
	}
	if pids := outliving(marker); len(pids) > 0 {
		t.Errorf("processes of the group outlived the timeout: %v", pids)
		for _, p := range pids {
			if proc, err := os.FindProcess(p); err == nil {
				proc.Kill()
			}
		}
	}
}

// uniqueMarker is a sleep duration of about a minute that no other test
// process uses: two runs of the suite at once do not see each other's
// sleeps.
func uniqueMarker(n int) string { return fmt.Sprintf("6%d.%07d", n, os.Getpid()%10000000) }

// outliving returns the processes whose command line holds marker once
// the kill has had time to land: polled, because a loaded machine may
// take a moment to reap them.
func outliving(marker string) []int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := running(marker)
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running returns the pids whose command line holds marker, from /proc.
func running(marker string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no allowlist", Options{Dir: dir}, "allow:"},
		{"a path in the allowlist", Options{Allow: []string{"/bin/sh"}, Dir: dir}, "bare program name"},
		{"no dir", Options{Allow: []string{"ls"}}, "dir:"},
		{"missing dir", Options{Allow: []string{"ls"}, Dir: filepath.Join(dir, "nope")}, "not a directory"},
		{"env", Options{Allow: []string{"ls", "env"}, Dir: dir}, `allow[1] "env" is not among the programs the shell tool knows to run no other program`},
		{"xargs", Options{Allow: []string{"xargs"}, Dir: dir}, `allow[0] "xargs" is not among`},
		{"a shell", Options{Allow: []string{"sh"}, Dir: dir}, `allow[0] "sh" is not among`},
		// Programs with an escape of their own, whose names say nothing.
		{"a database client", Options{Allow: []string{"sqlite3"}, Dir: dir}, `allow[0] "sqlite3" is not among`},
		{"a macro processor", Options{Allow: []string{"m4"}, Dir: dir}, `allow[0] "m4" is not among`},
		{"a calculator", Options{Allow: []string{"dc"}, Dir: dir}, `allow[0] "dc" is not among`},
		{"git", Options{Allow: []string{"git"}, Dir: dir}, "allow_exec"},
		{"a versioned interpreter", Options{Allow: []string{"python3.12"}, Dir: dir}, "an interpreter"},
		{"allow_exec outside allow", Options{Allow: []string{"ls"}, AllowExec: []string{"sh"}, Dir: dir}, `allow_exec[0] "sh": not in allow`},
	} {
		if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
