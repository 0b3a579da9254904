package agent

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentry/agentry/store"
)

// BenchmarkLoop10TurnsStored is the reference workload with the SQLite
// run store on: what durability costs a turn (its ns/turn against
// BenchmarkLoop10Turns').
func BenchmarkLoop10TurnsStored(b *testing.B) {
	benchStored(b, 10)
}

// BenchmarkStoredTurns runs the workload at 1, 10 and 50 turns: the
// store's cost per turn must not grow with the history.
func BenchmarkStoredTurns(b *testing.B) {
	for _, n := range []int{2, 10, 50} {
		b.Run("turns="+strconv.Itoa(n), func(b *testing.B) { benchStored(b, n) })
	}
}

func benchStored(b *testing.B, turns int) {
	s := benchScriptN(b, turns)
	a := benchAgent(b, s)
	a.limits.MaxTurns = turns
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	input := map[string]any{"task": "add"}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		res, err := a.Run(ctx, input, WithSessionProvider(s.Model()), WithStore(st))
		if err != nil || res.Iterations != turns {
			b.Fatalf("%v after %d turns", err, res.Iterations)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*turns), "ns/turn")
}
