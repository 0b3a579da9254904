package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/sqlite"
)

// The store and its WAL sidecars are the owner's only, whatever the
// umask, also where an older release left them readable.
func TestFileModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(path string)
	}{
		{"a new store", func(string) {}},
		{"an existing store with readable sidecars", func(path string) {
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			// Held open, so SQLite keeps the sidecars while they are
			// loosened and the store is opened again.
			t.Cleanup(func() { s.Close() })
			writeRun(t, s, "run_old")
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				os.Chmod(p, 0o644)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "runs.db")
			tc.setup(path)
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			writeRun(t, s, "run_1")
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatalf("after a write: %v", err)
				}
				if m := st.Mode().Perm(); m != 0o600 {
					t.Errorf("%s is %o, want 600", filepath.Base(p), m)
				}
			}
		})
	}
}

func writeRun(t *testing.T, s store.Store, id string) {
	t.Helper()
	if err := s.Create(context.Background(), store.Run{ID: id, Kind: "agent", Name: "a", Status: store.Running}); err != nil {
		t.Fatal(err)
	}
}
