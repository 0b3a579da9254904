package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memdriver"
)

// Memory returns the store's memory streams (migration 3's tables).
func (s *DB) Memory() memory.Memory { return (*streams)(s) }

// DB returns the store's document collections.
func (s *DB) DB() memory.DB { return (*docs)(s) }

type streams DB

const entryColumns = `id, stream, kind, text, run_id, agent, user_id, at, expires`

func (m *streams) Append(ctx context.Context, e memory.Entry, keep memory.Retention) (memory.Entry, error) {
	if err := memdriver.CheckEntry(e, keep); err != nil {
		return memory.Entry{}, err
	}
	s := (*DB)(m)
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return memory.Entry{}, s.memErr("append", err)
	}
	defer done()
	defer tx.Rollback()
	if l := s.d.Text.streamLock; l != "" {
		if _, err := tx.ExecContext(ctx, s.q(l), e.Stream); err != nil {
			return memory.Entry{}, s.memErr("append", err)
		}
	}
	e = memdriver.Stamp(ctx, e, keep, 0, s.now())
	at := micros(e.Time)
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM agentry_memory WHERE stream = ? AND expires > 0 AND expires <= ?`), e.Stream, at); err != nil {
		return memory.Entry{}, s.memErr("append", err)
	}
	err = tx.QueryRowContext(ctx, s.q(`INSERT INTO agentry_memory (stream, kind, text, run_id, agent, user_id, at, expires)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		e.Stream, e.Kind, e.Text, e.RunID, e.Agent, e.UserID, at, micros(e.Expires)).Scan(&e.ID)
	if err != nil {
		return memory.Entry{}, s.memErr("append", err)
	}
	if text, ok := memdriver.TextFor(ctx, e, e.ID); ok {
		// A sealed text is bound to the id the insert gave.
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE agentry_memory SET text = ? WHERE id = ?`), text, e.ID); err != nil {
			return memory.Entry{}, s.memErr("append", err)
		}
		e.Text = text
	}
	if keep.MaxEntries > 0 {
		_, err := tx.ExecContext(ctx, s.q(`DELETE FROM agentry_memory WHERE stream = ? AND id <= (
			SELECT id FROM agentry_memory WHERE stream = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`), e.Stream, e.Stream, keep.MaxEntries)
		if err != nil {
			return memory.Entry{}, s.memErr("append: retention", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return memory.Entry{}, s.memErr("append", err)
	}
	return e, nil
}

func scanEntry(row interface{ Scan(...any) error }, extra ...any) (memory.Entry, error) {
	var e memory.Entry
	var at, expires int64
	err := row.Scan(append([]any{&e.ID, &e.Stream, &e.Kind, &e.Text, &e.RunID, &e.Agent, &e.UserID, &at, &expires}, extra...)...)
	e.Time, e.Expires = fromMicros(at), fromMicros(expires)
	return e, err
}

func (m *streams) Read(ctx context.Context, stream string, o memory.ReadOptions) ([]memory.Entry, error) {
	if err := memdriver.CheckRead(stream, o); err != nil {
		return nil, err
	}
	s := (*DB)(m)
	where := []string{"stream = ?", "(expires = 0 OR expires > ?)"}
	args := []any{stream, s.now().UnixMicro()}
	if !o.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, micros(o.Since))
	}
	if !o.Until.IsZero() {
		where, args = append(where, "at < ?"), append(args, micros(o.Until))
	}
	query := `SELECT ` + entryColumns + ` FROM agentry_memory WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id` + desc(o.Order == memory.Newest)
	if o.Limit > 0 {
		query, args = query+" LIMIT ?", append(args, o.Limit)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, s.memErr("read "+stream, err)
	}
	defer rows.Close()
	var out []memory.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, s.memErr("read "+stream, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (m *streams) Search(ctx context.Context, query string, o memory.SearchOptions) ([]memory.Hit, error) {
	if err := memdriver.CheckName("stream", o.Stream); err != nil {
		return nil, err
	}
	s := (*DB)(m)
	terms := memdriver.Terms(query)
	if len(terms) == 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, s.q(s.d.Text.searchEntries), s.d.Text.match(terms), o.Stream, s.now().UnixMicro(), limitOr(o.Limit, 10))
	if err != nil {
		return nil, s.memErr("search "+o.Stream, err)
	}
	defer rows.Close()
	var out []memory.Hit
	for rows.Next() {
		var h memory.Hit
		if h.Entry, err = scanEntry(rows, &h.Score); err != nil {
			return nil, s.memErr("search "+o.Stream, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func (m *streams) Clear(ctx context.Context, stream string) error {
	if err := memdriver.CheckName("stream", stream); err != nil {
		return err
	}
	s := (*DB)(m)
	if _, err := s.exec(ctx, s.q(`DELETE FROM agentry_memory WHERE stream = ?`), stream); err != nil {
		return s.memErr("clear "+stream, err)
	}
	return nil
}

// memErr is the error of a memory operation that failed in the database.
func (s *DB) memErr(op string, err error) error {
	return fmt.Errorf("memory (%s): %s: %w", s.d.Name, op, err)
}

func limitOr(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

type docs DB

const docColumns = `collection, doc_key, value, run_id, agent, user_id, at`

func (m *docs) Write(ctx context.Context, d memory.Doc) (memory.Doc, error) {
	d, err := memdriver.CheckDoc(d)
	if err != nil {
		return memory.Doc{}, err
	}
	s := (*DB)(m)
	data, _ := json.Marshal(d.Value) // CheckDoc read it from JSON
	d.Time = fromMicros(micros(s.now()))
	_, err = s.exec(ctx, s.q(`INSERT INTO agentry_docs (collection, doc_key, value, text, run_id, agent, user_id, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (collection, doc_key) DO UPDATE SET value = excluded.value, text = excluded.text,
			run_id = excluded.run_id, agent = excluded.agent, user_id = excluded.user_id, at = excluded.at`),
		d.Collection, d.Key, s.d.Text.jsonParam(data), memdriver.DocText(d.Value), d.RunID, d.Agent, d.UserID, micros(d.Time))
	if err != nil {
		return memory.Doc{}, s.memErr("write "+d.Collection+"/"+d.Key, err)
	}
	return d, nil
}

func scanDoc(row interface{ Scan(...any) error }, extra ...any) (memory.Doc, error) {
	var d memory.Doc
	var value []byte
	var at int64
	if err := row.Scan(append([]any{&d.Collection, &d.Key, &value, &d.RunID, &d.Agent, &d.UserID, &at}, extra...)...); err != nil {
		return d, err
	}
	d.Time = fromMicros(at)
	if err := json.Unmarshal(value, &d.Value); err != nil {
		return d, fmt.Errorf("the value of %s/%s: %w", d.Collection, d.Key, err)
	}
	return d, nil
}

func (m *docs) Read(ctx context.Context, collection, key string) (memory.Doc, error) {
	if err := errors.Join(memdriver.CheckName("collection", collection), memdriver.CheckName("key", key)); err != nil {
		return memory.Doc{}, err
	}
	s := (*DB)(m)
	d, err := scanDoc(s.db.QueryRowContext(ctx, s.q(`SELECT `+docColumns+` FROM agentry_docs WHERE collection = ? AND doc_key = ?`), collection, key))
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("%w: %s/%s", memory.ErrNotFound, collection, key)
	}
	if err != nil {
		return d, s.memErr("read "+collection+"/"+key, err)
	}
	return d, nil
}

func (m *docs) Query(ctx context.Context, collection string, q memory.Query) ([]memory.Doc, error) {
	if err := errors.Join(memdriver.CheckName("collection", collection), memdriver.CheckQuery(q)); err != nil {
		return nil, err
	}
	s := (*DB)(m)
	where, args := []string{"collection = ?"}, []any{collection}
	for _, f := range q.Where {
		w, a := s.d.Text.filter(memdriver.Path(f.Field), f)
		where, args = append(where, w), append(args, a...)
	}
	order := "doc_key" + desc(q.Desc)
	if q.OrderBy != "" {
		order = s.d.Text.order(memdriver.Path(q.OrderBy), q.Desc)
	}
	query := `SELECT ` + docColumns + ` FROM agentry_docs WHERE ` + strings.Join(where, " AND ") + ` ORDER BY ` + order + ` LIMIT ?`
	return s.docs(ctx, "query "+collection, query, append(args, limitOr(q.Limit, 100))...)
}

func (m *docs) Search(ctx context.Context, collection, text string, topK int) ([]memory.DocHit, error) {
	if err := memdriver.CheckName("collection", collection); err != nil {
		return nil, err
	}
	s := (*DB)(m)
	terms := memdriver.Terms(text)
	if len(terms) == 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, s.q(s.d.Text.searchDocs), s.d.Text.match(terms), collection, limitOr(topK, 10))
	if err != nil {
		return nil, s.memErr("search "+collection, err)
	}
	defer rows.Close()
	var out []memory.DocHit
	for rows.Next() {
		var h memory.DocHit
		if h.Doc, err = scanDoc(rows, &h.Score); err != nil {
			return nil, s.memErr("search "+collection, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// docs runs a query of documents.
func (s *DB) docs(ctx context.Context, what, query string, args ...any) ([]memory.Doc, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, s.memErr(what, err)
	}
	defer rows.Close()
	var out []memory.Doc
	for rows.Next() {
		d, err := scanDoc(rows)
		if err != nil {
			return nil, s.memErr(what, err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
