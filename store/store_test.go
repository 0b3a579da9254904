package store

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The postgres backend is not imported by this package's tests (the
// sqlite one is, by the example): Open names what to import.
func TestOpenNeedsABackend(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"", "empty data source name"},
		{"postgres://db/x", "no postgres backend is registered (import github.com/agentry/agentry/store/postgres; registered: sqlite)"},
		{"postgresql://db/x", "no postgres backend is registered"},
	} {
		t.Run(tc.dsn, func(t *testing.T) {
			if _, err := Open(context.Background(), tc.dsn); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) = %v, want %q", tc.dsn, err, tc.want)
			}
		})
	}
}

func TestStatuses(t *testing.T) {
	for _, tc := range []struct {
		s                Status
		valid, resumable bool
	}{
		{Running, true, false}, {Completed, true, false}, {Failed, true, false}, {Aborted, true, false},
		{AwaitingApproval, true, true}, {Interrupted, true, true}, {"sleeping", false, false},
	} {
		if tc.s.Valid() != tc.valid || tc.s.Resumable() != tc.resumable {
			t.Errorf("%s: valid %v resumable %v, want %v %v", tc.s, tc.s.Valid(), tc.s.Resumable(), tc.valid, tc.resumable)
		}
	}
	err := error(&HeldError{RunID: "run_a", Holder: "h", Until: time.Unix(0, 0)})
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "held by h") {
		t.Errorf("HeldError = %v", err)
	}
}

func TestHolders(t *testing.T) {
	a, b := NewHolder(), NewHolder()
	if a == b {
		t.Fatal("two holders of one process are equal")
	}
	host, _ := os.Hostname()
	parts := strings.Split(a, "/")
	if len(parts) != 5 || parts[0] != host || parts[2] != strconv.Itoa(os.Getpid()) {
		t.Fatalf("holder %q does not name this host and process", a)
	}
	machine := parts[1]
	if machine == "?" {
		t.Fatal("this machine's boot and pid namespace are unknown")
	}
	holder := func(machine, pid, nonce string) string {
		return strings.Join([]string{host, machine, pid, nonce, "1"}, "/")
	}
	for _, tc := range []struct {
		name, holder string
		dead         bool
	}{
		{"this process", a, false},
		{"no such process", holder(machine, "999999999", parts[3]), true},
		{"an earlier process with this pid", holder(machine, parts[2], "zzzz"), true},
		// Two containers with one host name: the other's pid 999999999 is
		// not ours to judge, however dead it looks here.
		{"another container", holder("0123456789abcdef0123456789abcdef.4026531836", "999999999", "x"), false},
		{"another pid namespace", holder(strings.Split(machine, ".")[0]+".1", "999999999", "x"), false},
		{"an unknown machine", holder("?", "999999999", "x"), false},
		{"another host", "elsewhere/" + machine + "/1/x/1", false},
		{"an older form", host + "/999999999/x/1", false},
		{"not a holder", "not a holder", false},
		{"no pid", holder(machine, "abc", "x"), false},
		{"pid 1 lives", holder(machine, "1", parts[3]), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HolderDead(tc.holder); got != tc.dead {
				t.Errorf("HolderDead(%q) = %v, want %v", tc.holder, got, tc.dead)
			}
		})
	}
}
