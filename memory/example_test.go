package memory_test

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/memory"
	_ "github.com/agentry/agentry/memory/inmem" // registers "mem:"
)

// A stream remembers entries in order and finds them by their words; a
// collection keeps documents by key and queries their fields.
func ExampleOpen() {
	ctx := context.Background()
	b, err := memory.Open(ctx, "mem:") // or a SQLite path, postgres://…, redis://…
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	m := b.Memory()
	keep := memory.Retention{MaxEntries: 100}
	m.Append(ctx, memory.Entry{Stream: "user:ada", Kind: "preference", Text: "Prefers window seats"}, keep)
	m.Append(ctx, memory.Entry{Stream: "user:ada", Kind: "fact", Text: "Allergic to peanuts"}, keep)
	hits, _ := m.Search(ctx, "which seat", memory.SearchOptions{Stream: "user:ada"})
	fmt.Println(hits[0].Text)

	db := b.DB()
	db.Write(ctx, memory.Doc{Collection: "cities", Key: "lisbon", Value: map[string]any{"country": "Portugal", "population": 545000}})
	db.Write(ctx, memory.Doc{Collection: "cities", Key: "madrid", Value: map[string]any{"country": "Spain", "population": 3300000}})
	big, _ := db.Query(ctx, "cities", memory.Query{Where: []memory.Filter{{Field: "population", Op: memory.Gt, Value: 1000000}}})
	fmt.Println(big[0].Key)
	// Output:
	// Prefers window seats
	// madrid
}
