package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/sqlite"
)

// One file is the run store and the agents' memory: the store Open
// returns is a store.Store and a memory.Backend (agent.WithMemory takes
// it as one).
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "agentry-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "agentry.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	var runs store.Store = db
	var backend memory.Backend = db

	runs.Create(ctx, store.Run{ID: "run_1", Kind: "agent", Name: "concierge", Version: "v1", Status: store.Completed})
	r, _ := runs.Get(ctx, "run_1")
	fmt.Println(r.Name, r.Status)

	m := backend.Memory()
	m.Append(ctx, memory.Entry{Stream: "user:ada", Kind: "preference", Text: "Prefers window seats", RunID: "run_1"},
		memory.Retention{MaxEntries: 100})
	hits, _ := m.Search(ctx, "which seat", memory.SearchOptions{Stream: "user:ada"})
	fmt.Println(hits[0].Text)
	// Output:
	// concierge completed
	// Prefers window seats
}
