package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agentry/agentry/store"
)

// AppendAudit adds a record at the end of the chain, under the lock of
// the chain's head, so that concurrent writers make one chain.
func (s *DB) AppendAudit(ctx context.Context, r store.AuditRecord) (store.AuditRecord, error) {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return r, fmt.Errorf("store: audit: %w", err)
	}
	defer done()
	defer tx.Rollback()
	if r, err = s.appendAudit(ctx, tx, r); err != nil {
		return r, err
	}
	if err := tx.Commit(); err != nil {
		return r, fmt.Errorf("store: audit: %w", err)
	}
	return r, nil
}

// appendAudit appends r in tx, so that what it audits and the record
// commit together.
func (s *DB) appendAudit(ctx context.Context, tx *sql.Tx, r store.AuditRecord) (store.AuditRecord, error) {
	if r.RunID == "" && r.Target == "" || r.Rule == "" || r.Decision == "" {
		return r, fmt.Errorf("store: audit record needs a run or a target, a rule and a decision (got %q, %q, %q, %q)", r.RunID, r.Target, r.Rule, r.Decision)
	}
	if r.Time.IsZero() {
		r.Time = s.now()
	}
	r.Time = r.Time.Truncate(time.Microsecond).UTC() // as stored, so the hash holds when read back
	var headSeq int64
	if err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM agentry_audit_head WHERE id = 1`+s.d.ForUpdate).Scan(&headSeq, &r.Prev); err != nil {
		return r, fmt.Errorf("store: audit: reading the head of the chain: %w", err)
	}
	r.Hash = store.HashAudit(r.Prev, &r)
	err := tx.QueryRowContext(ctx, s.q(`INSERT INTO agentry_audit (at, run_id, agent, user_id, rule, decision, target, reason, prev, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`),
		r.Time.UnixMicro(), r.RunID, r.Agent, r.UserID, r.Rule, r.Decision, r.Target, r.Reason, r.Prev, r.Hash).Scan(&r.Seq)
	if err != nil {
		return r, fmt.Errorf("store: audit: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE agentry_audit_head SET seq = ?, hash = ? WHERE id = 1`), r.Seq, r.Hash); err != nil {
		return r, fmt.Errorf("store: audit: %w", err)
	}
	return r, nil
}

// AuditLog returns the records of a run, or all of them.
func (s *DB) AuditLog(ctx context.Context, runID string) ([]store.AuditRecord, error) {
	return s.auditLog(ctx, s.db, runID)
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *DB) auditLog(ctx context.Context, q querier, runID string) ([]store.AuditRecord, error) {
	query := `SELECT seq, at, run_id, agent, user_id, rule, decision, target, reason, prev, hash FROM agentry_audit`
	var args []any
	if runID != "" {
		query += ` WHERE run_id = ?`
		args = append(args, runID)
	}
	rows, err := q.QueryContext(ctx, s.q(query+` ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("store: audit log: %w", err)
	}
	defer rows.Close()
	var out []store.AuditRecord
	for rows.Next() {
		var r store.AuditRecord
		var at int64
		if err := rows.Scan(&r.Seq, &at, &r.RunID, &r.Agent, &r.UserID, &r.Rule, &r.Decision, &r.Target, &r.Reason, &r.Prev, &r.Hash); err != nil {
			return nil, fmt.Errorf("store: audit log: %w", err)
		}
		r.Time = time.UnixMicro(at).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: audit log: %w", err)
	}
	return out, nil
}

// VerifyAudit checks the whole chain against its head, both read in one
// read-only transaction: one snapshot, so a record appended meanwhile is
// either in both or in neither, never taken for tampering.
func (s *DB) VerifyAudit(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: s.d.Snapshot})
	if err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	defer tx.Rollback()
	var head string
	if err := tx.QueryRowContext(ctx, `SELECT hash FROM agentry_audit_head WHERE id = 1`).Scan(&head); err != nil {
		return fmt.Errorf("store: audit: reading the head of the chain: %w", err)
	}
	recs, err := s.auditLog(ctx, tx, "")
	if err != nil {
		return err
	}
	return store.VerifyChain(recs, head)
}
