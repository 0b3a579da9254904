package sqlstore

import (
	"context"
	"database/sql"
	"strings"
)

// writeStmts are the statements every write runs, prepared when the
// store opens: parsed once, not once a write (and never prepared while
// a write holds the database, which a second connection would wait for).
type writeStmts struct {
	holder *sql.Stmt
	// update is the UPDATE of a run's row for each shape of write: bit 0
	// sets its status, bit 1 its summary, bit 2 releases its lease.
	update [8]*sql.Stmt
}

// updateSQL is the UPDATE of a run's row for shape (writeStmts.update).
func updateSQL(shape int) string {
	set := []string{"updated_at = ?"}
	if shape&1 != 0 {
		set = append(set, "status = ?")
	}
	if shape&2 != 0 {
		set = append(set, "outcome = ?", "turns = ?", "tokens = ?", "cost_usd = ?", "error = ?")
	}
	if shape&4 != 0 {
		set = append(set, "holder = ''", "lease_until = 0")
	}
	return `UPDATE agentry_runs SET ` + strings.Join(set, ", ") + ` WHERE id = ? AND holder = ?`
}

// prepare prepares the write statements.
func (s *DB) prepare(ctx context.Context) error {
	var err error
	if s.stmts.holder, err = s.db.PrepareContext(ctx, s.q(`SELECT holder FROM agentry_runs WHERE id = ?`+s.d.ForUpdate)); err != nil {
		return err
	}
	for shape := range s.stmts.update {
		if s.stmts.update[shape], err = s.db.PrepareContext(ctx, s.q(updateSQL(shape))); err != nil {
			return err
		}
	}
	return nil
}

// closeStmts closes the write statements.
func (s *DB) closeStmts() {
	for _, st := range append([]*sql.Stmt{s.stmts.holder}, s.stmts.update[:]...) {
		if st != nil {
			st.Close()
		}
	}
}
