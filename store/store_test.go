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
	if len(parts) != 4 || parts[0] != host || parts[1] != strconv.Itoa(os.Getpid()) {
		t.Fatalf("holder %q does not name this host and process", a)
	}
	dead := strings.Join([]string{host, "999999999", parts[2], "1"}, "/")
	earlier := strings.Join([]string{host, parts[1], "zzzz", "1"}, "/")
	for _, tc := range []struct {
		holder string
		dead   bool
	}{
		{a, false},                              // this process
		{dead, true},                            // no such process
		{earlier, true},                         // an earlier process with this pid
		{"elsewhere/1/x/1", false},              // another host: trusted to its lease
		{"not a holder", false},                 // a form NewHolder does not make
		{host + "/abc/x/1", false},              // no pid
		{host + "/1/" + parts[2] + "/1", false}, // pid 1 lives
	} {
		if got := HolderDead(tc.holder); got != tc.dead {
			t.Errorf("HolderDead(%q) = %v, want %v", tc.holder, got, tc.dead)
		}
	}
}
