package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite" // the "sqlite" backend
)

// A store opened by its data source name; a run written, leased and
// listed.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "agentry-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "runs.db")) // or "postgres://..."
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	holder := store.NewHolder()
	st.Create(ctx, store.Run{ID: "run_1", Kind: "agent", Name: "adder", Version: "v1",
		Status: store.Running, Holder: holder, LeaseUntil: time.Now().Add(time.Minute)})
	err = st.Append(ctx, store.Write{RunID: "run_1", Holder: holder,
		Records: []store.Record{{Kind: store.KindEvent, Turn: 1, Data: []byte(`{"type":"turn_start"}`)}},
		Status:  store.Completed, Release: true})
	fmt.Println(err)
	err = st.Append(ctx, store.Write{RunID: "run_1", Holder: "someone else"})
	fmt.Println(err)
	runs, _ := st.List(ctx, store.Filter{Name: "adder"})
	fmt.Println(runs[0].ID, runs[0].Status)
	// Output:
	// <nil>
	// store: lease lost: run run_1 is held by "", not "someone else"
	// run_1 completed
}
