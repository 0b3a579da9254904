package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentry/agentry/store"
)

var _ store.Conversations = (*DB)(nil)

// joinConversation admits r into its conversation, in r's transaction,
// and returns its place in it: the conversation exists and is r's
// user's, no other run of it goes on (a *store.BusyError names the one
// that does), and the history r read is still the newest
// (ErrStaleHistory). The conversation row is locked first
// (Dialect.ForUpdate), so two runs that race to join see each other.
func (s *DB) joinConversation(ctx context.Context, ex execer, r *store.Run, now time.Time) (int64, error) {
	var user, forkedAt string
	var runs int64
	err := ex.QueryRowContext(ctx, s.q(`SELECT user_id, forked_at, runs FROM agentry_conversations WHERE id = ?`+s.d.ForUpdate), r.Conversation).
		Scan(&user, &forkedAt, &runs)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: %s", store.ErrNoConversation, r.Conversation)
	}
	if err != nil {
		return 0, fmt.Errorf("store: create run %s: %w", r.ID, err)
	}
	if user != r.User {
		return 0, fmt.Errorf("store: create run %s: it is %s's, and conversation %s is %s's", r.ID, owner(r.User), r.Conversation, owner(user))
	}
	var id, status, holder string
	var lease int64
	err = ex.QueryRowContext(ctx, s.q(`SELECT id, status, holder, lease_until FROM agentry_runs
		WHERE conversation_id = ? AND status IN ('running', 'awaiting_approval') ORDER BY created_at DESC LIMIT 1`), r.Conversation).
		Scan(&id, &status, &holder, &lease)
	switch {
	case err == nil:
		st := store.Status(status)
		if st == store.Running && (lease < now.UnixMicro() || store.HolderDead(holder)) {
			st = store.Interrupted
		}
		return 0, &store.BusyError{Conversation: r.Conversation, RunID: id, Status: st}
	case !errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("store: create run %s: %w", r.ID, err)
	}
	newest, err := s.newestHistory(ctx, ex, r.Conversation, forkedAt)
	if err != nil {
		return 0, fmt.Errorf("store: create run %s: %w", r.ID, err)
	}
	if newest != r.HistoryOf {
		return 0, fmt.Errorf("%w: run %s read the history of %q, and %q's is newer", store.ErrStaleHistory, r.ID, r.HistoryOf, newest)
	}
	agent := r.Name
	if r.Version != "" {
		agent += "@" + r.Version
	}
	if _, err := ex.ExecContext(ctx, s.q(`UPDATE agentry_conversations SET runs = runs + 1, agent = ?, updated_at = ? WHERE id = ?`),
		agent, now.UnixMicro(), r.Conversation); err != nil {
		return 0, fmt.Errorf("store: create run %s: %w", r.ID, err)
	}
	return runs + 1, nil
}

// newestHistory is the run whose history the conversation's next run
// starts from: its newest run with one, by the store's order, else the
// run a fork began from, else "".
func (s *DB) newestHistory(ctx context.Context, ex execer, conv, forkedAt string) (string, error) {
	var id string
	err := ex.QueryRowContext(ctx, s.q(`SELECT r.id FROM agentry_runs r JOIN agentry_log l ON l.run_id = r.id
		WHERE r.conversation_id = ? AND l.kind = 'history' ORDER BY r.conversation_seq DESC LIMIT 1`), conv).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return forkedAt, nil
	}
	return id, err
}

// owner names a user in an error.
func owner(user string) string {
	if user == "" {
		return "the local operator"
	}
	return "user " + user
}

// CreateConversation adds a conversation (store.Conversations).
func (s *DB) CreateConversation(ctx context.Context, c store.Conversation) error {
	if c.ID == "" {
		return errors.New("store: create conversation: it has no id")
	}
	done, err := s.turn(ctx)
	if err != nil {
		return err
	}
	defer done()
	return s.insertConversation(ctx, s.db, c, "", 0, "")
}

// insertConversation inserts c, with the history record a fork begins
// from (its format, turn and data; "" for none).
func (s *DB) insertConversation(ctx context.Context, ex execer, c store.Conversation, format string, turn int, base string) error {
	now := s.now()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	res, err := ex.ExecContext(ctx, s.q(`INSERT INTO agentry_conversations
		(id, user_id, agent, forked_from, forked_at, base_format, base_turn, base, runs, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT (id) DO NOTHING`),
		c.ID, c.User, c.Agent, c.ForkedFrom, c.ForkedAt, format, turn, base, micros(c.CreatedAt), micros(now))
	if err != nil {
		return fmt.Errorf("store: create conversation %s: %w", c.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: conversation %s", store.ErrExists, c.ID)
	}
	return nil
}

const conversationColumns = `id, user_id, agent, forked_from, forked_at, runs, created_at, updated_at`

func scanConversation(row interface{ Scan(...any) error }) (store.Conversation, error) {
	var c store.Conversation
	var created, updated int64
	err := row.Scan(&c.ID, &c.User, &c.Agent, &c.ForkedFrom, &c.ForkedAt, &c.Runs, &created, &updated)
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return c, err
}

// Conversation returns one conversation (store.Conversations).
func (s *DB) Conversation(ctx context.Context, id string) (store.Conversation, error) {
	c, err := scanConversation(s.db.QueryRowContext(ctx, s.q(`SELECT `+conversationColumns+` FROM agentry_conversations WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("%w: %s", store.ErrNoConversation, id)
	}
	if err != nil {
		return c, fmt.Errorf("store: conversation %s: %w", id, err)
	}
	return c, nil
}

// ListConversations returns conversations, most recently updated first
// (store.Conversations).
func (s *DB) ListConversations(ctx context.Context, f store.ConversationFilter) ([]store.Conversation, error) {
	var where []string
	var args []any
	if f.User != "" {
		where, args = append(where, "user_id = ?"), append(args, f.User)
	}
	if f.Cursor != "" {
		where = append(where, "(updated_at < (SELECT updated_at FROM agentry_conversations WHERE id = ?)"+
			" OR (updated_at = (SELECT updated_at FROM agentry_conversations WHERE id = ?) AND id < ?))")
		args = append(args, f.Cursor, f.Cursor, f.Cursor)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	query := `SELECT ` + conversationColumns + ` FROM agentry_conversations`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.db.QueryContext(ctx, s.q(query+" ORDER BY updated_at DESC, id DESC LIMIT ?"), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: list conversations: %w", err)
	}
	defer rows.Close()
	var out []store.Conversation
	for rows.Next() {
		c, err := scanConversation(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list conversations: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// History returns the record the conversation's next run starts from
// (store.Conversations): one row, however many runs it has.
func (s *DB) History(ctx context.Context, id string) (*store.RunRecord, error) {
	rec := &store.RunRecord{Record: store.Record{Kind: store.KindHistory}}
	var at int64
	var data string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT r.id, l.seq, l.format, l.turn, l.at, l.data FROM agentry_runs r
		JOIN agentry_log l ON l.run_id = r.id
		WHERE r.conversation_id = ? AND l.kind = 'history' ORDER BY r.conversation_seq DESC, l.seq DESC LIMIT 1`), id).
		Scan(&rec.RunID, &rec.Seq, &rec.Format, &rec.Turn, &at, &data)
	if err == nil {
		rec.Time, rec.Data = fromMicros(at), []byte(data)
		return rec, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: conversation %s: history: %w", id, err)
	}
	err = s.db.QueryRowContext(ctx, s.q(`SELECT forked_at, base_format, base_turn, base, created_at FROM agentry_conversations WHERE id = ?`), id).
		Scan(&rec.RunID, &rec.Format, &rec.Turn, &data, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w: %s", store.ErrNoConversation, id)
	case err != nil:
		return nil, fmt.Errorf("store: conversation %s: history: %w", id, err)
	case data == "":
		return nil, nil
	}
	rec.Time, rec.Data = fromMicros(at), []byte(data)
	return rec, nil
}

// Fork creates c from the history of the run at of the conversation from
// (store.Conversations).
func (s *DB) Fork(ctx context.Context, from, at string, c store.Conversation) error {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("store: fork %s: %w", from, err)
	}
	defer done()
	defer tx.Rollback()
	var conv string
	err = tx.QueryRowContext(ctx, s.q(`SELECT conversation_id FROM agentry_runs WHERE id = ?`), at).Scan(&conv)
	if errors.Is(err, sql.ErrNoRows) || err == nil && conv != from {
		return fmt.Errorf("%w: %s is not a run of conversation %s", store.ErrNotFound, at, from)
	}
	if err != nil {
		return fmt.Errorf("store: fork %s: %w", from, err)
	}
	var format, data string
	var turn int
	err = tx.QueryRowContext(ctx, s.q(`SELECT format, turn, data FROM agentry_log WHERE run_id = ? AND kind = 'history' ORDER BY seq DESC LIMIT 1`), at).
		Scan(&format, &turn, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: fork %s at run %s: the run has not ended: it has no history yet", from, at)
	}
	if err != nil {
		return fmt.Errorf("store: fork %s: %w", from, err)
	}
	c.ForkedFrom, c.ForkedAt = from, at
	if err := s.insertConversation(ctx, tx, c, format, turn, data); err != nil {
		return err
	}
	return tx.Commit()
}

// DeleteConversation deletes a conversation with its runs, their sub-runs
// and their logs, and audits it (store.Conversations).
func (s *DB) DeleteConversation(ctx context.Context, id, by string) ([]string, error) {
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	defer done()
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, s.q(`SELECT runs FROM agentry_conversations WHERE id = ?`+s.d.ForUpdate), id).Scan(&n); errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", store.ErrNoConversation, id)
	} else if err != nil {
		return nil, fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	var going, status string
	err = tx.QueryRowContext(ctx, s.q(`SELECT id, status FROM agentry_runs WHERE conversation_id = ?
		AND (status = 'running' AND lease_until >= ? OR status = 'awaiting_approval') LIMIT 1`), id, s.now().UnixMicro()).Scan(&going, &status)
	switch {
	case err == nil: // a run that goes on, or waits for a person (a driver may wait on it)
		return nil, &store.BusyError{Conversation: id, RunID: going, Status: store.Status(status)}
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	ids, err := s.runsOf(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	for chunk := range slices.Chunk(ids, rowsPerInsert) {
		in, args := inList(chunk)
		for _, q := range []string{`DELETE FROM agentry_log WHERE run_id IN ` + in, `DELETE FROM agentry_runs WHERE id IN ` + in} {
			if _, err := tx.ExecContext(ctx, s.q(q), args...); err != nil {
				return nil, fmt.Errorf("store: delete conversation %s: %w", id, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM agentry_conversations WHERE id = ?`), id); err != nil {
		return nil, fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	if _, err := s.appendAudit(ctx, tx, store.AuditRecord{UserID: by, Rule: "conversation.delete", Decision: "delete",
		Target: "conversation:" + id, Reason: fmt.Sprintf("deleted with %d runs (sub-runs included) and their logs", len(ids))}); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: delete conversation %s: %w", id, err)
	}
	s.afterDelete(ctx)
	return ids, nil
}

// afterDelete runs the dialect's AfterDelete (SQLite: a checkpoint that
// truncates the write-ahead log, waiting up to the busy timeout for
// readers of an older snapshot). When it cannot finish, a reader holding
// on longer, it is tried again in the background until it does or the
// store closes: the rows are gone either way, and the deletion is not
// failed for the bytes a reader keeps alive.
func (s *DB) afterDelete(ctx context.Context) {
	if s.d.AfterDelete == "" || s.fold(context.WithoutCancel(ctx)) {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.closed:
				return
			case <-t.C:
				if s.fold(context.Background()) {
					return
				}
			}
		}
	}()
}

// fold runs AfterDelete once and says whether it finished (its row's
// first column, SQLite's "busy", is 0).
func (s *DB) fold(ctx context.Context) bool {
	var busy, log, done int
	err := s.db.QueryRowContext(ctx, s.d.AfterDelete).Scan(&busy, &log, &done)
	return err == nil && busy == 0
}

// runsOf is the ids of a conversation's runs and of all their sub-runs
// (a sub-agent's, a pipeline's stages), parents first.
func (s *DB) runsOf(ctx context.Context, tx *sql.Tx, id string) ([]string, error) {
	var ids []string
	next, err := s.ids(ctx, tx, `SELECT id FROM agentry_runs WHERE conversation_id = ? ORDER BY created_at`, id)
	for err == nil && len(next) > 0 {
		ids = append(ids, next...)
		level := next
		next = nil
		for chunk := range slices.Chunk(level, rowsPerInsert) {
			in, args := inList(chunk)
			var kids []string
			if kids, err = s.ids(ctx, tx, `SELECT id FROM agentry_runs WHERE parent_id IN `+in, args...); err != nil {
				break
			}
			next = append(next, kids...)
		}
	}
	return ids, err
}

// inList is "(?, ?, …)" for ids, and ids as arguments.
func inList(ids []string) (string, []any) {
	args := make([]any, len(ids))
	for i, v := range ids {
		args[i] = v
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ") + ")", args
}

func (s *DB) ids(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
