package sqlite_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/sqlite"
)

// BenchmarkAppendEvents appends a run's events in batches of 32, as a
// run's log commits them (a turn's events and records): events/s is the
// event store's rate.
func BenchmarkAppendEvents(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Create(ctx, store.Run{ID: "run_b", Kind: "agent", Name: "bench", Status: store.Running, Holder: "h",
		LeaseUntil: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	ev := json.RawMessage(`{"type":"tool_call_end","run_id":"run_b","agent_name":"bench","turn":3,"time":"2026-11-22T21:00:00.123Z","seq":17,` +
		`"tool":{"id":"call_3_1","name":"add","arguments":{"a":2,"b":3},"status":"success","duration_ms":0.012,"output":5}}`)
	const batch = 32
	recs := make([]store.Record, batch)
	for i := range recs {
		recs[i] = store.Record{Kind: store.KindEvent, Turn: i, Data: ev}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if err := s.Append(ctx, store.Write{RunID: "run_b", Holder: "h", Records: recs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "events/s")
}
