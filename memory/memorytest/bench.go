package memorytest

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentry/agentry/memory"
)

// Bench runs the benchmarks every backend reports: an append to a stream
// that keeps 1,000 entries, and a search of such a stream.
func Bench(b *testing.B, open func(b *testing.B) memory.Backend) {
	b.Run("Append", func(b *testing.B) {
		m := open(b)
		defer m.Close()
		ctx := context.Background()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if _, err := m.Memory().Append(ctx, memory.Entry{Stream: "bench", Text: fmt.Sprintf("entry %d about flights, hotels and seat %d", i, i%97)},
				memory.Retention{MaxEntries: 1000}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Search1000", func(b *testing.B) {
		m := open(b)
		defer m.Close()
		ctx := context.Background()
		for i := range 1000 {
			text := fmt.Sprintf("entry %d about flights, hotels and seat %d", i, i%97)
			if i%50 == 0 {
				text += " with a window"
			}
			if _, err := m.Memory().Append(ctx, memory.Entry{Stream: "bench", Text: text}, memory.Retention{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			hits, err := m.Memory().Search(ctx, "window seat", memory.SearchOptions{Stream: "bench", Limit: 5})
			if err != nil || len(hits) != 5 {
				b.Fatalf("%d hits, %v", len(hits), err)
			}
		}
	})
}
