package journal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite"
)

// Whatever a writer is given, the store holds it redacted: records,
// committed or queued, and audit records.
func TestWriterRedacts(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	const secret = "sk-proj-CANARYwriter0000000000000001"
	w, err := journal.Create(ctx, st, store.Run{ID: "run_w", Kind: "agent", Name: "a"},
		&runlog.Start{Kind: "agent", RunID: "run_w", Input: map[string]any{"key": secret}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(journal.Record(store.KindToolResult, 1, "run_w:1:0", runlog.ToolResult{Tool: "t", Arguments: `{"k": "` + secret + `"}`}))
	if err := w.Audit(ctx, store.AuditRecord{Rule: "r", Decision: "block", Target: "tool:t", Reason: "found " + secret}); err != nil {
		t.Fatal(err)
	}
	if err := w.End(ctx, store.Completed, store.Summary{}, 1, map[string]string{"answer": secret}); err != nil {
		t.Fatal(err)
	}
	recs, _ := st.Records(ctx, "run_w", 0)
	audit, _ := st.AuditLog(ctx, "run_w")
	var all strings.Builder
	for _, r := range recs {
		all.Write(r.Data)
	}
	for _, a := range audit {
		all.WriteString(a.Reason)
	}
	if len(recs) != 3 || len(audit) != 1 || strings.Contains(all.String(), secret) || !strings.Contains(all.String(), "[REDACTED:secret]") {
		t.Errorf("%d records, %d audit records; the store holds:\n%s", len(recs), len(audit), all.String())
	}
}

// A writer whose records are never committed by hand commits them itself
// once MaxQueued wait: a run that makes no model call (a plan or service
// agent) does not queue without bound.
func TestWriterQueueIsBounded(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	w, err := journal.Create(ctx, st, store.Run{ID: "run_q", Kind: "agent", Name: "a"}, &runlog.Start{Kind: "agent", RunID: "run_q"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range journal.MaxQueued + 10 {
		w.Add(journal.Record(store.KindEvent, i, "", map[string]int{"n": i}))
	}
	recs, _ := st.Records(ctx, "run_q", 0)
	if len(recs) < journal.MaxQueued {
		t.Errorf("%d records in the store after %d were added; want the first %d committed", len(recs), journal.MaxQueued+10, journal.MaxQueued)
	}
	w.Release(ctx)
}

// CommitWithin commits what is queued by itself once it has waited long
// enough, with no other write after it: an event queued before a long
// model call reaches a watcher while the model works. After the run is
// released, the timer writes nothing.
func TestCommitWithin(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	w, err := journal.Create(ctx, st, store.Run{ID: "run_c", Kind: "agent", Name: "a"}, &runlog.Start{Kind: "agent", RunID: "run_c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(journal.Record(store.KindEvent, 1, "", map[string]string{"type": "turn_start"}))
	// The start was committed just now: the event is not due yet.
	if err := w.CommitWithin(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		recs, _ := st.Records(ctx, "run_c", 0)
		if len(recs) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued event never reached the store: %d records", len(recs))
		}
	}
	w.Add(journal.Record(store.KindEvent, 1, "", map[string]string{"type": "late"}))
	if err := w.CommitWithin(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	w.Release(ctx)
	if recs, _ := st.Records(ctx, "run_c", 0); len(recs) != 2 {
		t.Errorf("%d records after the release", len(recs))
	}
}

// A writer refused by the store (its lease taken over) fails every later
// write with ErrStore, and ends nothing.
func TestWriterAfterTheLeaseIsLost(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	w, err := journal.Create(ctx, st, store.Run{ID: "run_l", Kind: "agent", Name: "a"}, &runlog.Start{Kind: "agent", RunID: "run_l"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Break(ctx, "run_l", w.Holder()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, journal.Record(store.KindEvent, 1, "", 1)); !errors.Is(err, journal.ErrStore) || !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a write after the lease was lost: %v", err)
	}
	if err := w.End(ctx, store.Completed, store.Summary{}, 1, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("End after the lease was lost: %v", err)
	}
	if run, _ := st.Get(ctx, "run_l"); run.Status == store.Completed {
		t.Error("a writer without the lease ended the run")
	}
}
