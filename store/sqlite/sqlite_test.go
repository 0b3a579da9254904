package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memorytest"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/prompt/prompttest"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/sqlite"
	"github.com/agentry/agentry/store/storetest"
)

func writeFile(path string) error { return os.WriteFile(path, []byte("x"), 0o600) }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The in-process database meets the same contract, shared by every
// connection of the pool, and each store opened so is its own.
func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
	ctx := context.Background()
	a, _ := sqlite.Open(ctx, ":memory:")
	b, _ := sqlite.Open(ctx, ":memory:")
	defer a.Close()
	defer b.Close()
	if err := a.Create(ctx, store.Run{ID: "run_a", Kind: "agent", Name: "adder", Status: store.Running}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "run_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another in-memory store sees the run: %v", err)
	}
}

func TestReopenKeepsRunsAndSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "dir", "runs.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, store.Run{ID: "run_a", Kind: "agent", Name: "adder", Status: store.Completed}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(ctx, "sqlite:"+path) // migrations already applied: nothing to do
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, err := s.Get(ctx, "run_a"); err != nil || r.Name != "adder" {
		t.Errorf("after reopening: %+v, %v", r, err)
	}
	db := s.(interface{ SQL() *sql.DB }).SQL()
	var versions, latest int
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM agentry_schema`).Scan(&versions, &latest); err != nil || versions != latest || latest < 2 {
		t.Errorf("schema versions recorded = %d up to %d, %v; want each version once", versions, latest, err)
	}
	// A database a newer release migrated is refused, not misread.
	if _, err := db.Exec(`INSERT INTO agentry_schema (version, applied_at) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	if s2, err := store.Open(ctx, path); err == nil || !strings.Contains(err.Error(), "newer") {
		if s2 != nil {
			s2.Close()
		}
		t.Errorf("opening a newer schema: %v, want an error saying it is newer", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, dsn, want string }{
		{"empty", "", "empty data source name"},
		{"not a database", filepath.Join("testdata", "not-a-database.db"), "not-a-database.db"},
		{"directory in the way", filepath.Join(t.TempDir(), "file", "runs.db"), "runs.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "directory in the way" {
				if err := writeFile(filepath.Dir(tc.dsn)); err != nil {
					t.Fatal(err)
				}
			}
			s, err := store.Open(ctx, tc.dsn)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q): no error", tc.dsn)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) = %v, want it to name %q", tc.dsn, err, tc.want)
			}
		})
	}
}

func TestMemoryConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Backend {
		b, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "agentry.db"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func BenchmarkMemory(b *testing.B) {
	memorytest.Bench(b, func(b *testing.B) memory.Backend {
		m, err := memory.Open(context.Background(), filepath.Join(b.TempDir(), "agentry.db"))
		if err != nil {
			b.Fatal(err)
		}
		return m
	})
}

func TestPromptConformance(t *testing.T) {
	prompttest.Run(t, func(t *testing.T) prompt.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "agentry.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Prompts()
	})
}

// A prompt put is audited in the chain, with its version and author.
func TestPromptPutIsAudited(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "agentry.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		if _, err := s.Prompts().Put(ctx, prompt.Template{ID: "greet", Text: "Hi", CreatedBy: "ada"}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.AuditLog(ctx, "")
	if err != nil || len(recs) != 2 || recs[1].Rule != "prompt.put" || recs[1].Target != "prompt:greet@2" || recs[1].UserID != "ada" {
		t.Fatalf("audit log: %+v, %v", recs, err)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Error(err)
	}
}

// A path with '#', '?' or '%' in it is the file opened: a file: URI
// would otherwise end at the first of them, and open another file.
func TestOpenAnyPath(t *testing.T) {
	for _, name := range []string{"runs#1.db", "runs?x=1.db", "100%.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			st, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the store is not at %s: %v", path, err)
			}
		})
	}
}

// TestWatch: a watcher of a run hears this process's writes to it, and
// not another run's; once stopped it hears nothing.
func TestWatch(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"run_w", "run_x"} {
		if err := s.Create(ctx, store.Run{ID: id, Kind: "agent", Name: "a", Status: store.Running, Holder: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	changed, stop := s.Watch("run_w")
	write := func(id string) {
		t.Helper()
		if err := s.Append(ctx, store.Write{RunID: id, Holder: "h", Records: []store.Record{{Kind: store.KindEvent, Data: []byte(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	write("run_x")
	select {
	case <-changed:
		t.Fatal("a write to another run was heard")
	default:
	}
	write("run_w")
	write("run_w") // two writes, one wake-up: the reader reads both
	select {
	case <-changed:
	default:
		t.Fatal("the run's write was not heard")
	}
	stop()
	write("run_w")
	select {
	case <-changed:
		t.Fatal("heard after the watch was stopped")
	default:
	}
}

// TestDeletedConversationLeavesNothing: a deleted conversation's words
// are in neither the database file nor its WAL, free pages included.
func TestDeletedConversationLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reader time.Duration // how long another connection holds a read snapshot while the deletion runs
	}{{"alone", 0}, {"a reader that lets go", 300 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "runs.db")
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.CreateConversation(ctx, store.Conversation{ID: "conv_1"}); err != nil {
				t.Fatal(err)
			}
			canary := strings.Repeat("the-secret-canary ", 400) // large enough to fill pages of its own
			for i, id := range []string{"run_1", "run_2"} {
				run := store.Run{ID: id, Kind: "agent", Name: "chat", Status: store.Running, Holder: "h", Conversation: "conv_1"}
				if i > 0 {
					run.HistoryOf = "run_1"
				}
				recs := []store.Record{{Kind: store.KindStart, Data: []byte(`{"input": "` + canary + `"}`)}}
				if err := s.Append(ctx, store.Write{RunID: id, Holder: "h", Create: &run, Records: recs}); err != nil {
					t.Fatal(err)
				}
				if err := s.Append(ctx, store.Write{RunID: id, Holder: "h", Status: store.Completed, Release: true,
					Records: []store.Record{{Kind: store.KindHistory, Turn: i, Data: []byte(`{"messages": ["` + canary + `"]}`)}}}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.reader > 0 { // a read transaction holds the WAL as it is, then lets go
				tx, err := s.SQL().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				var n int
				if err := tx.QueryRow(`SELECT count(*) FROM agentry_log`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				time.AfterFunc(tc.reader, func() { tx.Rollback() })
			}
			if _, err := s.DeleteConversation(ctx, "conv_1", "ada"); err != nil {
				t.Fatal(err)
			}
			// The store is still open: what its files hold now is what a
			// copy of them taken now would hold.
			for _, f := range []string{path, path + "-wal"} {
				data, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				if strings.Contains(string(data), "the-secret-canary") {
					t.Errorf("%s still holds the deleted conversation", filepath.Base(f))
				}
			}
		})
	}
}
