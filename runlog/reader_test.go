package runlog_test

import (
	"context"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// TestEventsNumberedByTheLog: a stored run's events, read back, carry
// their place in the log as their seq, increasing and never repeated,
// as the server's event stream numbers them.
func TestEventsNumberedByTheLog(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	a, err := agent.FromFile("../examples/adder/agent.json", agent.WithTools(adderTools()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, map[string]any{"task": "add 2 and 3"}, agent.WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	l, err := runlog.Read(ctx, st, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	events, err := l.Events()
	if err != nil || len(events) < 5 {
		t.Fatalf("%d events, %v", len(events), err)
	}
	recs, _ := st.Records(ctx, res.ID, 0)
	var want []uint64
	for _, r := range recs {
		if r.Kind == store.KindEvent {
			want = append(want, uint64(r.Seq))
		}
	}
	if len(want) != len(events) {
		t.Fatalf("%d events, %d event records", len(events), len(want))
	}
	for i, e := range events {
		if e.Seq != want[i] {
			t.Fatalf("event %d (%s) has seq %d, its record %d", i, e.Type, e.Seq, want[i])
		}
	}
}
