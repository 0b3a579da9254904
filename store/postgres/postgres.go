// Package postgres is the server run store: Postgres through
// github.com/jackc/pgx/v5, holding runs, memory and prompts. Importing
// it registers the "postgres" backend with store.Open and memory.Open,
// which take postgres:// and postgresql:// URLs. The
// tables are created in the connection's schema (set search_path in the
// URL to keep them apart), prefixed agentry_.
package postgres

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/sqlstore"
)

var dialect = sqlstore.Dialect{Name: "postgres", Numbered: true, ForUpdate: " FOR UPDATE", Snapshot: sql.LevelRepeatableRead,
	// One key for every agentry schema: migrations are rare and short.
	MigrationLock: `SELECT pg_advisory_xact_lock(7461636)`, SeqKey: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
	Text: sqlstore.PostgresText()}

// Open connects to the Postgres database url names and brings its schema
// up to date. The *sqlstore.DB it returns is the run store (a
// store.Store), a memory backend (a memory.Backend) and a prompt store
// (its Prompts method) in that database; Close it when done.
func Open(ctx context.Context, url string) (*sqlstore.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("store (postgres): %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store (postgres): %w", err)
	}
	return sqlstore.Open(ctx, db, dialect)
}

func init() {
	store.Register("postgres", func(ctx context.Context, dsn string) (store.Store, error) { return Open(ctx, dsn) })
	memory.Register("postgres", func(ctx context.Context, dsn string) (memory.Backend, error) { return Open(ctx, dsn) })
}
