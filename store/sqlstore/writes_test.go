package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

// openSerial opens a SQLite store whose writes take turns, as
// store/sqlite opens it.
func openSerial(t *testing.T) *DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "runs.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), db, Dialect{Name: "sqlite", SeqKey: "INTEGER PRIMARY KEY", Text: SQLiteText(), SerialWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// queued waits until n writes wait for the write turn.
func queued(t *testing.T, s *DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.group.mu.Lock()
		got := len(s.group.pending)
		s.group.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", got, n)
		}
	}
}

// receive is the next outcome, or fails the test after 10 s.
func receive[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no write came back")
		panic("unreachable")
	}
}

// TestGroupCommit: writes that wait for the write turn together commit
// in one transaction, each on its own: one whose holder lost the run,
// and one that fails after changing the run's row, are rolled back
// alone, between two that commit, and one whose context ends while it
// waits leaves the queue unwritten.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := openSerial(t)
	for _, id := range []string{"run_a", "run_b", "run_c"} {
		r := store.Run{ID: id, Kind: "agent", Name: "adder", Version: "1", SessionID: "ses_" + id,
			Status: store.Running, Holder: "h1", LeaseUntil: time.Now().Add(time.Hour)}
		if err := s.Append(ctx, store.Write{RunID: id, Holder: "h1", Create: &r, Records: []store.Record{{Kind: store.KindStart}}}); err != nil {
			t.Fatal(err)
		}
	}
	write := func(runID, holder, text string) store.Write {
		return store.Write{RunID: runID, Holder: holder, Records: []store.Record{{Kind: store.KindEvent, Data: json.RawMessage(`"` + text + `"`)}}}
	}
	s.writer <- struct{}{} // the test holds the write turn: the writes queue
	cancelled, cancel := context.WithCancel(ctx)
	type outcome struct {
		name string
		err  error
	}
	broken := write("run_b", "h1", "broken")
	broken.Status = store.Completed
	broken.Records = append(broken.Records, store.Record{}) // no kind: refused after the row changed
	outcomes := make(chan outcome, 5)
	for i, w := range []struct {
		name  string
		ctx   context.Context
		write store.Write
	}{
		{"a", ctx, write("run_a", "h1", "a")},
		{"b, lease lost", ctx, write("run_b", "h2", "b")},
		{"broken", ctx, broken},
		{"cancelled", cancelled, write("run_c", "h1", "cancelled")},
		{"c", ctx, write("run_c", "h1", "c")},
	} {
		go func() { outcomes <- outcome{w.name, s.Append(w.ctx, w.write)} }()
		queued(t, s, i+1) // in this order
	}
	cancel()
	if o := receive(t, outcomes); o.name != "cancelled" || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("first back: %s with %v; want the cancelled write, context.Canceled", o.name, o.err)
	}
	queued(t, s, 4)
	s.done() // the turn is free: one of the four takes it and commits all
	got := map[string]error{}
	for range 4 {
		o := receive(t, outcomes)
		got[o.name] = o.err
	}
	if got["a"] != nil || got["c"] != nil || !errors.Is(got["b, lease lost"], store.ErrLeaseLost) || got["broken"] == nil {
		t.Fatalf("outcomes %v; want a and c written, b's lease lost, the broken write refused", got)
	}
	if r, err := s.Get(ctx, "run_b"); err != nil || r.Status != store.Running {
		t.Errorf("run_b is %s (%v); want it running: the broken write's status rolled back", r.Status, err)
	}
	for id, want := range map[string][]string{"run_a": {"a"}, "run_b": nil, "run_c": {"c"}} {
		recs, err := s.Records(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, r := range recs[1:] { // after the start record
			var text string
			_ = json.Unmarshal(r.Data, &text)
			texts = append(texts, text)
		}
		if len(texts) != len(want) || (len(want) == 1 && texts[0] != want[0]) {
			t.Errorf("%s holds %q, want %q", id, texts, want)
		}
	}
}
