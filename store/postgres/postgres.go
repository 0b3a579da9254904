// Package postgres is the server run store: Postgres through
// github.com/jackc/pgx/v5. Importing it registers the "postgres" backend
// with store.Open, which takes postgres:// and postgresql:// URLs. The
// tables are created in the connection's schema (set search_path in the
// URL to keep them apart), prefixed agentry_.
package postgres

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"

	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/store/internal/sqlstore"
)

// migrations bring the schema up, one version each. Never edit one that
// shipped: add the next.
var migrations = []string{
	`CREATE TABLE agentry_runs (
		id TEXT PRIMARY KEY,
		kind TEXT NOT NULL,
		name TEXT NOT NULL,
		version TEXT NOT NULL DEFAULT '',
		parent_id TEXT NOT NULL DEFAULT '',
		session_id TEXT NOT NULL DEFAULT '',
		status TEXT NOT NULL,
		holder TEXT NOT NULL DEFAULT '',
		lease_until BIGINT NOT NULL DEFAULT 0,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		outcome TEXT NOT NULL DEFAULT '',
		turns INTEGER NOT NULL DEFAULT 0,
		tokens INTEGER NOT NULL DEFAULT 0,
		cost_usd DOUBLE PRECISION,
		error TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX agentry_runs_created ON agentry_runs (created_at);
	CREATE INDEX agentry_runs_parent ON agentry_runs (parent_id);
	CREATE TABLE agentry_log (
		seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		run_id TEXT NOT NULL,
		kind TEXT NOT NULL,
		format TEXT NOT NULL,
		turn INTEGER NOT NULL,
		call_key TEXT NOT NULL DEFAULT '',
		at BIGINT NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX agentry_log_run ON agentry_log (run_id, seq);`,
	// 2: the audit log, one hash chain, and its head kept apart.
	`CREATE TABLE agentry_audit (
		seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		at BIGINT NOT NULL,
		run_id TEXT NOT NULL,
		agent TEXT NOT NULL DEFAULT '',
		user_id TEXT NOT NULL DEFAULT '',
		rule TEXT NOT NULL,
		decision TEXT NOT NULL,
		target TEXT NOT NULL DEFAULT '',
		reason TEXT NOT NULL DEFAULT '',
		prev TEXT NOT NULL,
		hash TEXT NOT NULL
	);
	CREATE INDEX agentry_audit_run ON agentry_audit (run_id, seq);
	CREATE TABLE agentry_audit_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL, hash TEXT NOT NULL);
	INSERT INTO agentry_audit_head (id, seq, hash) VALUES (1, 0, '');`,
}

var dialect = sqlstore.Dialect{Name: "postgres", Numbered: true, ForUpdate: " FOR UPDATE",
	// One key for every agentry schema: migrations are rare and short.
	MigrationLock: `SELECT pg_advisory_xact_lock(7461636)`, Migrations: migrations}

// Open connects to the Postgres database url names and brings its schema
// up to date.
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
}
