package postgres_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memorytest"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/prompt/prompttest"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/postgres"
	"github.com/agentry/agentry/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), testdb.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Processes that open one database at once migrate it once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	dsn := testdb.Postgres(t)
	var wg sync.WaitGroup
	stores := make([]store.Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = store.Open(context.Background(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var n, latest int
	if err := stores[0].(interface{ SQL() *sql.DB }).SQL().QueryRow(`SELECT COUNT(*), MAX(version) FROM agentry_schema`).Scan(&n, &latest); err != nil || n != latest || latest < 2 {
		t.Errorf("schema versions = %d up to %d, %v; want each version once", n, latest, err)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := store.Open(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "postgres") {
		t.Errorf("Open of an unreachable server = %v, want an error naming postgres", err)
	}
}

func TestMemoryConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Backend {
		b, err := memory.Open(context.Background(), testdb.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// A server stopped as by a crash and started again: while it is down,
// calls fail naming the backend; once it is back the pool reconnects, and
// every write it acknowledged is there.
func TestMemoryServerRestart(t *testing.T) {
	srv := testdb.StartPostgres(t)
	b, err := memory.Open(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	memorytest.Restart(t, b, srv.Stop, srv.Start, "memory (postgres)")
}

func BenchmarkMemory(b *testing.B) {
	memorytest.Bench(b, func(b *testing.B) memory.Backend {
		m, err := memory.Open(context.Background(), testdb.Postgres(b))
		if err != nil {
			b.Fatal(err)
		}
		return m
	})
}

func TestPromptConformance(t *testing.T) {
	prompttest.Run(t, func(t *testing.T) prompt.Store {
		s, err := postgres.Open(context.Background(), testdb.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Prompts()
	})
}
