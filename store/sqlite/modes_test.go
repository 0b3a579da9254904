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
// umask, also where an older release left the sidecars readable; a store
// its user made readable to a group keeps the mode they gave it.
func TestFileModes(t *testing.T) {
	ctx := context.Background()
	loosen := func(store, sidecars os.FileMode) func(path string) {
		return func(path string) {
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			// Held open, so SQLite keeps the sidecars while they are
			// loosened and the store is opened again.
			t.Cleanup(func() { s.Close() })
			writeRun(t, s, "run_old")
			os.Chmod(path, store)
			os.Chmod(path+"-wal", sidecars)
			os.Chmod(path+"-shm", sidecars)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(path string)
		want  os.FileMode
	}{
		{"a new store", func(string) {}, 0o600},
		{"an owner-only store with readable sidecars", loosen(0o600, 0o644), 0o600},
		{"a store its user shares with a group", loosen(0o640, 0o640), 0o640},
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
				if m := st.Mode().Perm(); m != tc.want {
					t.Errorf("%s is %o, want %o", filepath.Base(p), m, tc.want)
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
