// Package sqlite is the embedded run store: one SQLite file through the
// pure-Go modernc.org/sqlite driver (no cgo), in WAL mode. Importing it
// registers the "sqlite" backend with store.Open, which takes any data
// source name that is not a postgres:// URL as a file path.
//
// Commits are synchronous=NORMAL in WAL mode: a committed write survives
// the process being killed; a power loss may lose the last commits.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

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
		lease_until INTEGER NOT NULL DEFAULT 0,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		outcome TEXT NOT NULL DEFAULT '',
		turns INTEGER NOT NULL DEFAULT 0,
		tokens INTEGER NOT NULL DEFAULT 0,
		cost_usd REAL,
		error TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX agentry_runs_created ON agentry_runs (created_at);
	CREATE INDEX agentry_runs_parent ON agentry_runs (parent_id);
	CREATE TABLE agentry_log (
		seq INTEGER PRIMARY KEY,
		run_id TEXT NOT NULL,
		kind TEXT NOT NULL,
		format TEXT NOT NULL,
		turn INTEGER NOT NULL,
		call_key TEXT NOT NULL DEFAULT '',
		at INTEGER NOT NULL,
		data TEXT NOT NULL
	);
	CREATE INDEX agentry_log_run ON agentry_log (run_id, seq);`,
	// 2: the audit log, one hash chain, and its head kept apart.
	`CREATE TABLE agentry_audit (
		seq INTEGER PRIMARY KEY,
		at INTEGER NOT NULL,
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
	CREATE TABLE agentry_audit_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL);
	INSERT INTO agentry_audit_head (id, seq, hash) VALUES (1, 0, '');`,
}

var dialect = sqlstore.Dialect{Name: "sqlite", Migrations: migrations}

// Open opens (creating it and its directory when missing) the SQLite
// store at path and brings its schema up to date.
func Open(ctx context.Context, path string) (*sqlstore.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("store (sqlite): empty path")
	}
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store (sqlite) %s: %w", path, err)
		}
	}
	// Writers take the database lock when their transaction begins
	// (_txlock=immediate), so two writers wait for each other instead of
	// failing on a lock upgrade; busy_timeout is how long they wait.
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store (sqlite) %s: %w", path, err)
	}
	if path == ":memory:" {
		db.SetMaxOpenConns(1) // each connection would be its own database
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store (sqlite) %s: %w", path, err)
	}
	s, err := sqlstore.Open(ctx, db, dialect)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	if path != ":memory:" {
		os.Chmod(path, 0o600) // runs hold prompts and tool results: the owner's only
	}
	return s, nil
}

func init() {
	store.Register("sqlite", func(ctx context.Context, dsn string) (store.Store, error) { return Open(ctx, dsn) })
}
