// Package teststore gives tests a real run store: SQLite in the test's
// temporary directory, closed when the test ends.
package teststore

import (
	"context"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/store"
	_ "github.com/agentry/agentry/store/sqlite" // the store a test opens
)

// Open returns an empty SQLite store of the test's own.
func Open(t testing.TB) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), testdb.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
