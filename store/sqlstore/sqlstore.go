// Package sqlstore is the run store, memory backend and prompt store
// that agentry's SQL backends share: the same tables, migrations and
// statements over database/sql, with what differs between databases
// (placeholders, row locks, the DDL of migrations, text search) in a
// Dialect. It is for authors of SQL backends, as database/sql is for
// drivers: store/sqlite and store/postgres open a *sql.DB, call Open
// with their Dialect and return the *DB, which users hold as a
// store.Store and a memory.Backend, with a prompt.Store from Prompts.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/store"
)

// Dialect is what differs between the SQL backends. A backend declares
// one and passes it to Open.
type Dialect struct {
	// Name is the backend's name, for errors.
	Name string
	// Numbered makes placeholders numbered ($1, $2) instead of ?.
	Numbered bool
	// ForUpdate is appended to the SELECT that reads a run before a write
	// (" FOR UPDATE" where rows can be locked; SQLite locks the database
	// when the transaction begins).
	ForUpdate string
	// SerialWrites makes the writers of one process take turns before
	// they begin (SQLite: one writer at a time). A writer waiting in
	// SQLite's busy handler sleeps in growing steps; one waiting for its
	// turn here starts the moment the one before commits.
	SerialWrites bool
	// MigrationLock, when set, runs first in the migration transaction so
	// that two processes opening one database migrate it once.
	MigrationLock string
	// Snapshot is the isolation level under which a read-only
	// transaction sees one snapshot for all its statements (Postgres's
	// REPEATABLE READ; SQLite's default, a read transaction on a WAL
	// database, already does).
	Snapshot sql.IsolationLevel
	// SeqKey declares a log's sequence column: an auto-incrementing
	// integer primary key.
	SeqKey string
	// Text is how the backend stores JSON, searches text and filters
	// JSON fields, for memory and documents: SQLiteText or PostgresText.
	Text TextDialect
	// AfterDelete, when set, runs after a conversation is deleted, so
	// that nothing of it stays in the database's files (SQLite: a WAL
	// checkpoint, the pages zeroed by secure_delete). It answers one row
	// of three integers, the first non-zero while it could not finish.
	AfterDelete string
}

// migrations bring the schema up, one version each, written once for
// both backends: BIGINT and DOUBLE PRECISION mean the same to SQLite as
// its INTEGER and REAL, and SEQ_KEY is the one column each declares its
// own way (Dialect.SeqKey). Never edit one that shipped: add the next.
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
		seq SEQ_KEY,
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
		seq SEQ_KEY,
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
	// 3: memory streams and document collections, each with a text index
	// of the dialect's own (SEARCH_DDL).
	`CREATE TABLE agentry_memory (
		id SEQ_KEY,
		stream TEXT NOT NULL,
		kind TEXT NOT NULL DEFAULT '',
		text TEXT NOT NULL,
		run_id TEXT NOT NULL DEFAULT '',
		agent TEXT NOT NULL DEFAULT '',
		user_id TEXT NOT NULL DEFAULT '',
		at BIGINT NOT NULL,
		expires BIGINT NOT NULL DEFAULT 0
	);
	CREATE INDEX agentry_memory_stream ON agentry_memory (stream, id);
	CREATE TABLE agentry_docs (
		collection TEXT NOT NULL,
		doc_key TEXT NOT NULL,
		value JSON_TYPE NOT NULL,
		text TEXT NOT NULL,
		run_id TEXT NOT NULL DEFAULT '',
		agent TEXT NOT NULL DEFAULT '',
		user_id TEXT NOT NULL DEFAULT '',
		at BIGINT NOT NULL,
		PRIMARY KEY (collection, doc_key)
	);
	SEARCH_DDL`,
	// 4: the prompt store's templates, one row per version.
	`CREATE TABLE agentry_prompts (
		id TEXT NOT NULL,
		version INTEGER NOT NULL,
		data TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		PRIMARY KEY (id, version)
	);`,
	// 5: prompt versions are strings, as agents' are ("v1", "1.2.0"):
	// the table again with a text version, the rows kept ("3").
	`CREATE TABLE agentry_prompts_v5 (
		id TEXT NOT NULL,
		version TEXT NOT NULL,
		data TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		PRIMARY KEY (id, version)
	);
	INSERT INTO agentry_prompts_v5 (id, version, data, created_at)
		SELECT id, CAST(version AS TEXT), data, created_at FROM agentry_prompts;
	DROP TABLE agentry_prompts;
	ALTER TABLE agentry_prompts_v5 RENAME TO agentry_prompts;`,
	// 6: the digest that defines each agent version (store.Pins).
	`CREATE TABLE agentry_pins (
		name TEXT NOT NULL,
		version TEXT NOT NULL,
		digest TEXT NOT NULL,
		created_at BIGINT NOT NULL,
		PRIMARY KEY (name, version)
	);`,
	// 7: values kept by key, out of a durable-execution engine's history
	// (store.Blobs), as base64 text: both dialects' TEXT holds it.
	`CREATE TABLE agentry_blobs (
		key TEXT PRIMARY KEY,
		data TEXT NOT NULL,
		created_at BIGINT NOT NULL
	);
	CREATE INDEX agentry_blobs_created ON agentry_blobs (created_at);`,
	// 8: each run's owner, the user it was created for; the runs stored
	// before are the local operator's ('').
	`ALTER TABLE agentry_runs ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
	CREATE INDEX agentry_runs_user ON agentry_runs (user_id, created_at);`,
	// 9: conversations (store.Conversations): each run's, and the
	// conversations themselves, a fork with the history it began from.
	`ALTER TABLE agentry_runs ADD COLUMN conversation_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE agentry_runs ADD COLUMN conversation_seq BIGINT NOT NULL DEFAULT 0;
	CREATE INDEX agentry_runs_conversation ON agentry_runs (conversation_id, conversation_seq);
	CREATE TABLE agentry_conversations (
		id TEXT PRIMARY KEY,
		user_id TEXT NOT NULL DEFAULT '',
		agent TEXT NOT NULL DEFAULT '',
		forked_from TEXT NOT NULL DEFAULT '',
		forked_at TEXT NOT NULL DEFAULT '',
		base_format TEXT NOT NULL DEFAULT '',
		base_turn INTEGER NOT NULL DEFAULT 0,
		base TEXT NOT NULL DEFAULT '',
		runs INTEGER NOT NULL DEFAULT 0,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL
	);
	CREATE INDEX agentry_conversations_user ON agentry_conversations (user_id, updated_at);`,
}

// schema is the migrations in the dialect's words.
func (d *Dialect) schema() []string {
	out := make([]string, len(migrations))
	for i, m := range migrations {
		out[i] = strings.NewReplacer("SEQ_KEY", d.SeqKey, "JSON_TYPE", d.Text.jsonType, "SEARCH_DDL", d.Text.searchDDL).Replace(m)
	}
	return out
}

// DB is agentry's store over one *sql.DB: a run store (store.Store:
// runs, their logs and leases, the audit chain), a memory backend
// (memory.Backend: Memory and DB) and a prompt store (Prompts), all in
// the same database. It is safe for concurrent use. Open makes one.
type DB struct {
	db       *sql.DB
	d        Dialect
	writer   chan struct{} // the write turn, with Dialect.SerialWrites; nil: none
	watchers watchers      // the readers waiting for a run's writes (Watch)
	done     func()        // ends a write turn
	now      func() time.Time
	closed   chan struct{}  // closed by Close: background work stops
	stop     sync.Once      // closes closed
	bg       sync.WaitGroup // background work (afterDelete's retries)
	queries  sync.Map       // query text with ? → the dialect's text
	inserts  sync.Map       // number of records → prepared INSERT
	atClose  []func() error // AtClose
	group    group          // the writes waiting for the write turn (SerialWrites)
	stmts    writeStmts     // prepared at Open
}

// What DB promises to be.
var (
	_ store.Store      = (*DB)(nil)
	_ store.Watcher    = (*DB)(nil)
	_ store.KindReader = (*DB)(nil)
	_ memory.Backend   = (*DB)(nil)
)

// Open wraps db, runs the migrations it has not seen under the dialect
// d, and returns the store. It takes ownership of db: Close closes it,
// and so does Open when it fails.
func Open(ctx context.Context, db *sql.DB, d Dialect) (*DB, error) {
	s := &DB{db: db, d: d, now: time.Now, done: func() {}, closed: make(chan struct{})}
	if d.SerialWrites {
		s.writer = make(chan struct{}, 1)
		s.done = func() { <-s.writer }
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		s.closeStmts()
		db.Close()
		return nil, fmt.Errorf("store (%s): %w", d.Name, err)
	}
	return s, nil
}

// Close closes the database and the statements prepared on it.
func (s *DB) Close() error {
	s.stop.Do(func() { close(s.closed) })
	s.bg.Wait()
	s.inserts.Range(func(_, v any) bool {
		v.(*sql.Stmt).Close()
		return true
	})
	s.closeStmts()
	for _, f := range s.atClose {
		f()
	}
	return s.db.Close()
}

// AtClose has Close call f before it closes the database: a backend's
// own resource that lives as long as the store (a connection that keeps
// an in-memory database alive).
func (s *DB) AtClose(f func() error) { s.atClose = append(s.atClose, f) }

// SQL returns the database the store wraps, for a backend's own tests
// and tools. Statements run on it bypass the store's checks.
func (s *DB) SQL() *sql.DB { return s.db }

// q turns a query written with ? into the dialect's placeholders, once.
func (s *DB) q(query string) string {
	if !s.d.Numbered {
		return query
	}
	if v, ok := s.queries.Load(query); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	out := b.String()
	s.queries.Store(query, out)
	return out
}

func (s *DB) migrate(ctx context.Context) error {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("store (%s): migrate: %w", s.d.Name, err)
	}
	defer done()
	defer tx.Rollback()
	if s.d.MigrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.MigrationLock); err != nil {
			return fmt.Errorf("store (%s): migrate: lock: %w", s.d.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS agentry_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("store (%s): migrate: %w", s.d.Name, err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM agentry_schema`).Scan(&have); err != nil {
		return fmt.Errorf("store (%s): migrate: reading the schema version: %w", s.d.Name, err)
	}
	schema := s.d.schema()
	if have > len(schema) {
		return fmt.Errorf("store (%s): the database's schema is version %d, newer than this release knows (%d); use a newer agentry",
			s.d.Name, have, len(schema))
	}
	for v := have + 1; v <= len(schema); v++ {
		if _, err := tx.ExecContext(ctx, schema[v-1]); err != nil {
			return fmt.Errorf("store (%s): migration %d: %w", s.d.Name, v, err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO agentry_schema (version, applied_at) VALUES (?, ?)`), v, s.now().UnixMicro()); err != nil {
			return fmt.Errorf("store (%s): migration %d: %w", s.d.Name, v, err)
		}
	}
	return tx.Commit()
}

// micros stores times as microseconds since the epoch: one integer type
// every backend orders and compares the same way.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

// Create adds a run.
func (s *DB) Create(ctx context.Context, r store.Run) error {
	done, err := s.turn(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.createRun(ctx, s.db, r)
}

// execer is the database, or a write's transaction.
type execer interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// createRun inserts the run r with ex; a run of a conversation joins it
// (joinConversation).
func (s *DB) createRun(ctx context.Context, ex execer, r store.Run) error {
	if r.ID == "" {
		return errors.New("store: Create: the run has no id")
	}
	if !r.Status.Valid() || r.Status == store.Interrupted {
		return fmt.Errorf("store: Create: run %s: status %q is not one a run can be created with", r.ID, r.Status)
	}
	now := s.now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	var seq int64 // the run's place in its conversation, the store's to give
	if r.Conversation != "" {
		var err error
		if seq, err = s.joinConversation(ctx, ex, &r, now); err != nil {
			return err
		}
	}
	res, err := ex.ExecContext(ctx, s.q(`INSERT INTO agentry_runs
		(id, kind, name, version, parent_id, session_id, user_id, status, holder, lease_until, created_at, updated_at, outcome, turns, tokens, cost_usd, error, conversation_id, conversation_seq)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
		r.ID, r.Kind, r.Name, r.Version, r.ParentID, r.SessionID, r.User, string(r.Status), r.Holder, micros(r.LeaseUntil),
		micros(r.CreatedAt), micros(now), r.Outcome, r.Turns, r.Tokens, nullFloat(r.CostUSD), r.Error, r.Conversation, seq)
	if err != nil {
		return fmt.Errorf("store: create run %s: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %s", store.ErrExists, r.ID)
	}
	return nil
}

func nullFloat(f *float64) sql.NullFloat64 {
	if f == nil {
		return sql.NullFloat64{}
	}
	return sql.NullFloat64{Float64: *f, Valid: true}
}

const runColumns = `id, kind, name, version, parent_id, session_id, user_id, status, holder, lease_until, created_at, updated_at, outcome, turns, tokens, cost_usd, error, conversation_id`

// scanRun reads a row of runColumns; a running run whose lease ran out,
// or whose holder is found dead, is reported interrupted.
func (s *DB) scanRun(row interface{ Scan(...any) error }) (store.Run, error) {
	var r store.Run
	var status string
	var lease, created, updated int64
	var cost sql.NullFloat64
	if err := row.Scan(&r.ID, &r.Kind, &r.Name, &r.Version, &r.ParentID, &r.SessionID, &r.User, &status, &r.Holder, &lease,
		&created, &updated, &r.Outcome, &r.Turns, &r.Tokens, &cost, &r.Error, &r.Conversation); err != nil {
		return r, err
	}
	r.Status = store.Status(status)
	r.LeaseUntil, r.CreatedAt, r.UpdatedAt = fromMicros(lease), fromMicros(created), fromMicros(updated)
	if cost.Valid {
		c := cost.Float64
		r.CostUSD = &c
	}
	if r.Status == store.Running && (lease < s.now().UnixMicro() || store.HolderDead(r.Holder)) {
		r.Status = store.Interrupted
	}
	return r, nil
}

// Get returns a run.
func (s *DB) Get(ctx context.Context, id string) (store.Run, error) {
	r, err := s.scanRun(s.db.QueryRowContext(ctx, s.q(`SELECT `+runColumns+` FROM agentry_runs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	if err != nil {
		return r, fmt.Errorf("store: get run %s: %w", id, err)
	}
	return r, nil
}

// List returns runs, newest first.
func (s *DB) List(ctx context.Context, f store.Filter) ([]store.Run, error) {
	var where []string
	var args []any
	now := s.now().UnixMicro()
	if f.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, f.Kind)
	}
	if f.NotKind != "" {
		where, args = append(where, "kind <> ?"), append(args, f.NotKind)
	}
	if f.Name != "" {
		where, args = append(where, "name = ?"), append(args, f.Name)
	}
	if f.ParentID != "" {
		where, args = append(where, "parent_id = ?"), append(args, f.ParentID)
	}
	if f.User != "" {
		where, args = append(where, "user_id = ?"), append(args, f.User)
	}
	if f.Conversation != "" {
		where, args = append(where, "conversation_id = ?"), append(args, f.Conversation)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, f.Since.UnixMicro())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, f.Until.UnixMicro())
	}
	if f.Cursor != "" {
		// The runs after the cursor's in (created_at DESC, id DESC) order.
		where = append(where, "(created_at < (SELECT created_at FROM agentry_runs WHERE id = ?)"+
			" OR (created_at = (SELECT created_at FROM agentry_runs WHERE id = ?) AND id < ?))")
		args = append(args, f.Cursor, f.Cursor, f.Cursor)
	}
	switch f.Status {
	case "":
	case store.Running:
		where, args = append(where, "status = 'running' AND lease_until >= ?"), append(args, now)
	case store.Interrupted:
		// A running run whose holder died is interrupted too: scanRun
		// tells, and the rows are kept by what it says.
		where = append(where, "status IN ('interrupted', 'running')")
	default:
		if !f.Status.Valid() {
			return nil, fmt.Errorf("store: list: unknown status %q", f.Status)
		}
		where, args = append(where, "status = ?"), append(args, string(f.Status))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	query := `SELECT ` + runColumns + ` FROM agentry_runs`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_at DESC, id DESC LIMIT ?"
	rows, err := s.db.QueryContext(ctx, s.q(query), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := s.scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list runs: %w", err)
		}
		if f.Status != "" && r.Status != f.Status {
			continue // running by its row, its holder dead: or the other way
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	return out, nil
}

// Prune deletes old runs that nobody drives, with their logs.
func (s *DB) Prune(ctx context.Context, before time.Time) (int, error) {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	defer done()
	defer tx.Rollback()
	// A conversation's runs go with it, once it is quiet since before:
	// cutting its old runs alone would make it forget.
	cond := `created_at < ? AND NOT (status = 'running' AND lease_until >= ?) AND (conversation_id = ''
		OR conversation_id IN (SELECT id FROM agentry_conversations WHERE updated_at < ?))`
	now := s.now().UnixMicro()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM agentry_log WHERE run_id IN (SELECT id FROM agentry_runs WHERE `+cond+`)`),
		micros(before), now, micros(before)); err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.q(`DELETE FROM agentry_runs WHERE `+cond), micros(before), now, micros(before))
	if err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM agentry_conversations WHERE updated_at < ?
		AND NOT EXISTS (SELECT 1 FROM agentry_runs WHERE conversation_id = agentry_conversations.id)`), micros(before)); err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM agentry_blobs WHERE created_at < ?`), micros(before)); err != nil {
		return 0, fmt.Errorf("store: prune: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), tx.Commit()
}
