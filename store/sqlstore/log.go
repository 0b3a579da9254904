package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentry/agentry/store"
)

// rowsPerInsert is how many records one INSERT carries: seven parameters
// a row stays far below every backend's limit on parameters.
const rowsPerInsert = 64

// insertStmt returns the prepared INSERT of n records: a statement is
// parsed once per size, not once per commit.
func (s *DB) insertStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	if v, ok := s.inserts.Load(n); ok {
		return v.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, s.insertSQL(n))
	if err != nil {
		return nil, err
	}
	if v, loaded := s.inserts.LoadOrStore(n, st); loaded {
		st.Close()
		return v.(*sql.Stmt), nil
	}
	return st, nil
}

// readyInserts prepares the INSERTs n records take, before a write
// begins: preparing takes a connection of its own, which a database that
// locks readers out while it writes (SQLite in memory) would not give
// the transaction that waits for it.
func (s *DB) readyInserts(ctx context.Context, n int) error {
	for _, size := range []int{min(n, rowsPerInsert), n % rowsPerInsert} {
		if size == 0 {
			continue
		}
		if _, err := s.insertStmt(ctx, size); err != nil {
			return err
		}
	}
	return nil
}

func (s *DB) insertSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO agentry_log (run_id, kind, format, turn, call_key, at, data) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?)")
	}
	return s.q(b.String())
}

// Append applies a write in one transaction, after checking that its
// holder still holds the run. With Dialect.SerialWrites the writes that
// wait for the process's write turn are committed together: the one
// that takes the turn commits every write waiting then, each in a
// savepoint of one transaction (a write that fails is rolled back alone),
// and each returns once that transaction committed (group commit: one
// commit for many runs' writes, none returned before it is durable).
func (s *DB) Append(ctx context.Context, w store.Write) error {
	if w.Status != "" && (!w.Status.Valid() || w.Status == store.Interrupted) {
		return fmt.Errorf("store: append to run %s: status %q cannot be written", w.RunID, w.Status)
	}
	if err := s.readyInserts(ctx, len(w.Records)); err != nil {
		return fmt.Errorf("store: append to run %s: %w", w.RunID, err)
	}
	if s.writer != nil {
		return s.appendInGroup(ctx, &w)
	}
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("store: append to run %s: %w", w.RunID, err)
	}
	defer done()
	defer tx.Rollback()
	if err := s.apply(ctx, tx, &w); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: append to run %s: %w", w.RunID, err)
	}
	s.watchers.notify(w.RunID)
	return nil
}

// apply makes the write in tx: the run created when it asks, its holder
// checked, its records inserted and its row updated.
func (s *DB) apply(ctx context.Context, tx *sql.Tx, w *store.Write) error {
	if c := w.Create; c != nil {
		if c.ID != w.RunID || c.Holder != w.Holder {
			return fmt.Errorf("store: append to run %s: the run it creates is %s, held by %q", w.RunID, c.ID, c.Holder)
		}
		if err := s.createRun(ctx, tx, *c); err != nil {
			return err
		}
	}
	// The row's update is the holder's check: it changes the row only
	// while w's holder holds the run, and the records go in after it.
	now := s.now()
	if err := s.update(ctx, tx, w, now); err != nil {
		return err
	}
	return s.insert(ctx, tx, w.RunID, w.Records, now)
}

// notHeld is why a write of w's holder changed no row: the run is
// missing, or another holds it.
func (s *DB) notHeld(ctx context.Context, tx *sql.Tx, w *store.Write) error {
	var holder string
	err := tx.StmtContext(ctx, s.stmts.holder).QueryRowContext(ctx, w.RunID).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s", store.ErrNotFound, w.RunID)
	}
	if err != nil {
		return fmt.Errorf("store: append to run %s: %w", w.RunID, err)
	}
	return fmt.Errorf("%w: run %s is held by %q, not %q", store.ErrLeaseLost, w.RunID, holder, w.Holder)
}

func (s *DB) insert(ctx context.Context, tx *sql.Tx, runID string, recs []store.Record, now time.Time) error {
	args := make([]any, 0, 7*min(len(recs), rowsPerInsert))
	for len(recs) > 0 {
		n := min(len(recs), rowsPerInsert)
		args = args[:0]
		for i := range recs[:n] {
			r := &recs[i]
			if r.Kind == "" {
				return fmt.Errorf("store: append to run %s: record %d has no kind", runID, i)
			}
			format, at := r.Format, r.Time
			if format == "" {
				format = store.Format
			}
			if at.IsZero() {
				at = now
			}
			data := string(r.Data)
			if data == "" {
				data = "null"
			}
			args = append(args, runID, string(r.Kind), format, r.Turn, r.Key, at.UnixMicro(), data)
		}
		st, err := s.insertStmt(ctx, n)
		if err != nil {
			return fmt.Errorf("store: append to run %s: %w", runID, err)
		}
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("store: append to run %s: %w", runID, err)
		}
		recs = recs[n:]
	}
	return nil
}

// update changes the run's row as the write asks, when w's holder holds
// the run (else notHeld says why not): always its update time, and its
// status, summary and lease when set.
func (s *DB) update(ctx context.Context, tx *sql.Tx, w *store.Write, now time.Time) error {
	shape := 0
	args := make([]any, 1, 8)
	args[0] = now.UnixMicro()
	if w.Status != "" {
		shape |= 1
		args = append(args, string(w.Status))
	}
	if sm := w.Summary; sm != nil {
		shape |= 2
		args = append(args, sm.Outcome, sm.Turns, sm.Tokens, nullFloat(sm.CostUSD), sm.Error)
	}
	if w.Release {
		shape |= 4
	}
	res, err := tx.StmtContext(ctx, s.stmts.update[shape]).ExecContext(ctx, append(args, w.RunID, w.Holder)...)
	if err != nil {
		return fmt.Errorf("store: append to run %s: %w", w.RunID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return s.notHeld(ctx, tx, w)
	}
	return nil
}

// Records returns a run's records after a sequence number.
func (s *DB) Records(ctx context.Context, runID string, after int64) ([]store.Record, error) {
	return s.records(ctx, runID, `seq > ?`, after)
}

// RecordsOf returns a run's records of the kinds named (store.KindReader).
func (s *DB) RecordsOf(ctx context.Context, runID string, kinds ...store.Kind) ([]store.Record, error) {
	if len(kinds) == 0 {
		return nil, fmt.Errorf("store: read the log of run %s: no kind named", runID)
	}
	args := make([]any, len(kinds))
	for i, k := range kinds {
		args[i] = string(k)
	}
	return s.records(ctx, runID, `kind IN (?`+strings.Repeat(", ?", len(kinds)-1)+`)`, args...)
}

// records returns a run's records that cond (on the log's columns, its
// arguments args) keeps, in order; a run with none must exist.
func (s *DB) records(ctx context.Context, runID, cond string, args ...any) ([]store.Record, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT seq, kind, format, turn, call_key, at, data FROM agentry_log
		WHERE run_id = ? AND `+cond+` ORDER BY seq`), append([]any{runID}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("store: read the log of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		var r store.Record
		var kind, data string
		var at int64
		if err := rows.Scan(&r.Seq, &kind, &r.Format, &r.Turn, &r.Key, &at, &data); err != nil {
			return nil, fmt.Errorf("store: read the log of run %s: %w", runID, err)
		}
		r.Kind, r.Time, r.Data = store.Kind(kind), fromMicros(at), []byte(data)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read the log of run %s: %w", runID, err)
	}
	if out == nil {
		if _, err := s.Get(ctx, runID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Acquire leases a run to holder.
func (s *DB) Acquire(ctx context.Context, runID, holder string, ttl time.Duration) error {
	if holder == "" {
		return fmt.Errorf("store: acquire run %s: empty holder", runID)
	}
	now := s.now()
	res, err := s.exec(ctx, s.q(`UPDATE agentry_runs SET holder = ?, lease_until = ?, updated_at = ?
		WHERE id = ? AND (holder = '' OR holder = ? OR lease_until < ?)`),
		holder, now.Add(ttl).UnixMicro(), now.UnixMicro(), runID, holder, now.UnixMicro())
	if err != nil {
		return fmt.Errorf("store: acquire run %s: %w", runID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	r, err := s.Get(ctx, runID)
	if err != nil {
		return err
	}
	return &store.HeldError{RunID: runID, Holder: r.Holder, Until: r.LeaseUntil}
}

// Renew extends holder's lease.
func (s *DB) Renew(ctx context.Context, runID, holder string, ttl time.Duration) error {
	now := s.now()
	res, err := s.exec(ctx, s.q(`UPDATE agentry_runs SET lease_until = ? WHERE id = ? AND holder = ? AND holder <> ''`),
		now.Add(ttl).UnixMicro(), runID, holder)
	if err != nil {
		return fmt.Errorf("store: renew the lease of run %s: %w", runID, err)
	}
	return s.lost(ctx, res, runID, holder)
}

// Break frees the lease of a dead holder.
func (s *DB) Break(ctx context.Context, runID, holder string) error {
	res, err := s.exec(ctx, s.q(`UPDATE agentry_runs SET holder = '', lease_until = 0,
		status = CASE WHEN status = 'running' THEN 'interrupted' ELSE status END
		WHERE id = ? AND holder = ? AND holder <> ''`), runID, holder)
	if err != nil {
		return fmt.Errorf("store: break the lease of run %s: %w", runID, err)
	}
	return s.lost(ctx, res, runID, holder)
}

// lost turns an update that matched no row into ErrNotFound or
// ErrLeaseLost.
func (s *DB) lost(ctx context.Context, res sql.Result, runID, holder string) error {
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	if _, err := s.Get(ctx, runID); err != nil {
		return err
	}
	return fmt.Errorf("%w: run %s is not held by %q", store.ErrLeaseLost, runID, holder)
}
