package runlog_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// sealedRun writes a sealed run of three tool results and ends it.
func sealedRun(t *testing.T, st store.Store, s *runlog.Sealer, id string) {
	t.Helper()
	ctx := context.Background()
	w, err := journal.Create(ctx, st, store.Run{ID: id, Kind: "agent", Name: "a"},
		&runlog.Start{Kind: "agent", RunID: id, Input: map[string]any{"task": "PLAIN-INPUT"}}, nil, journal.Sealed(s))
	if err != nil {
		t.Fatal(err)
	}
	for i, out := range []string{"first", "second", "third"} {
		w.Add(journal.Record(store.KindToolResult, 1, id+":1:"+string(rune('0'+i)), runlog.ToolResult{Tool: "t", Arguments: "{}", Observation: out}))
	}
	if err := w.End(ctx, store.Failed, store.Summary{Error: "tool lookup: PLAIN-ERROR customer 42 not found"}, 1, map[string]string{"answer": "PLAIN-ANSWER"}); err != nil {
		t.Fatal(err)
	}
}

// TestSealedLog: a sealed log opens with its key only; its records hold
// no clear text; one moved within the run, dropped, planted in the clear,
// or moved to another run does not open.
func TestSealedLog(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := runlog.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	db := teststore.Open(t)
	sealedRun(t, db, s, "run_s")
	recs, _ := db.Records(ctx, "run_s", 0)
	for _, r := range recs {
		if strings.Contains(string(r.Data), "PLAIN") || strings.Contains(string(r.Data), "second") {
			t.Errorf("record %d holds clear text: %s", r.Seq, r.Data)
		}
	}
	if run, err := db.Get(ctx, "run_s"); err != nil || run.Error != runlog.SealedError {
		t.Errorf("the run's listed error: %q, %v", run.Error, err)
	}
	l, err := runlog.Read(ctx, db, "run_s", runlog.Sealed(s))
	if err != nil || l.Start.Input["task"] != "PLAIN-INPUT" || len(l.Results) != 3 || l.SealedRecords != uint64(len(recs)) {
		t.Fatalf("read with the key: %v, %+v", err, l)
	}
	if _, err := runlog.Read(ctx, db, "run_s"); !errors.Is(err, runlog.ErrSealed) || !strings.Contains(err.Error(), "no key was given") {
		t.Errorf("read without the key: %v", err)
	}
	other, _ := runlog.NewSealer([]byte("fedcba9876543210fedcba9876543210"))
	if _, err := runlog.Read(ctx, db, "run_s", runlog.Sealed(other)); !errors.Is(err, runlog.ErrSealed) {
		t.Errorf("read with another key: %v", err)
	}
}

// TestSealedLogTampering: whoever can write the database cannot swap two
// records, drop one, plant one in the clear, or move one from another
// run, without the reader refusing the log.
func TestSealedLogTampering(t *testing.T) {
	ctx := context.Background()
	s, _ := runlog.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	tests := []struct {
		name, sql string
	}{
		{"two records swapped", `UPDATE agentry_log SET data = CASE seq
			WHEN (SELECT MIN(seq) FROM agentry_log WHERE run_id = 'run_t' AND kind = 'tool_result') THEN (SELECT data FROM agentry_log WHERE seq = (SELECT MAX(seq) FROM agentry_log WHERE run_id = 'run_t' AND kind = 'tool_result'))
			WHEN (SELECT MAX(seq) FROM agentry_log WHERE run_id = 'run_t' AND kind = 'tool_result') THEN (SELECT data FROM agentry_log WHERE seq = (SELECT MIN(seq) FROM agentry_log WHERE run_id = 'run_t' AND kind = 'tool_result'))
			ELSE data END WHERE run_id = 'run_t'`},
		{"a record dropped", `DELETE FROM agentry_log WHERE seq = (SELECT MIN(seq) FROM agentry_log WHERE run_id = 'run_t' AND kind = 'tool_result')`},
		{"a record planted in the clear", `INSERT INTO agentry_log (run_id, kind, format, turn, call_key, at, data)
			VALUES ('run_t', 'tool_result', 'agentry.log/v1', 1, 'run_t:1:9', 0, '{"tool": "t", "arguments": "{}"}')`},
		{"a record from another run", `UPDATE agentry_log SET data = (SELECT data FROM agentry_log WHERE run_id = 'run_o' AND kind = 'start')
			WHERE run_id = 'run_t' AND kind = 'start'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := teststore.Open(t)
			sealedRun(t, db, s, "run_t")
			sealedRun(t, db, s, "run_o")
			if _, err := runlog.Read(ctx, db, "run_t", runlog.Sealed(s)); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			if _, err := db.(interface{ SQL() *sql.DB }).SQL().ExecContext(ctx, tt.sql); err != nil {
				t.Fatal(err)
			}
			if _, err := runlog.Read(ctx, db, "run_t", runlog.Sealed(s)); !errors.Is(err, runlog.ErrSealed) {
				t.Errorf("a tampered log was read: %v", err)
			}
		})
	}
}
