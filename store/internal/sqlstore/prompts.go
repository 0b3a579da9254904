package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/store"
)

// Prompts returns the store's prompt templates (migration 4's table):
// each Put is audited in the same transaction.
func (s *DB) Prompts() prompt.Store { return (*prompts)(s) }

type prompts DB

func (p *prompts) Get(ctx context.Context, id string, version int) (prompt.Template, error) {
	s := (*DB)(p)
	var data string
	var err error
	if version == 0 {
		err = s.db.QueryRowContext(ctx, s.q(`SELECT data FROM agentry_prompts WHERE id = ? ORDER BY version DESC LIMIT 1`), id).Scan(&data)
	} else {
		err = s.db.QueryRowContext(ctx, s.q(`SELECT data FROM agentry_prompts WHERE id = ? AND version = ?`), id, version).Scan(&data)
	}
	ref := id
	if version > 0 {
		ref += "@" + strconv.Itoa(version)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return prompt.Template{}, fmt.Errorf("%w: %s", prompt.ErrNotFound, ref)
	}
	if err != nil {
		return prompt.Template{}, fmt.Errorf("prompt (%s): get %s: %w", s.d.Name, ref, err)
	}
	var t prompt.Template
	if err := json.Unmarshal([]byte(data), &t); err != nil {
		return t, fmt.Errorf("prompt (%s): %s: %w", s.d.Name, ref, err)
	}
	return t, nil
}

func (p *prompts) Put(ctx context.Context, t prompt.Template) (prompt.Template, error) {
	if probs := prompt.Validate(t); len(probs) > 0 {
		return t, fmt.Errorf("%w: %s", prompt.ErrInvalid, strings.Join(probs, "; "))
	}
	s := (*DB)(p)
	fail := func(err error) (prompt.Template, error) {
		return t, fmt.Errorf("prompt (%s): put %s: %w", s.d.Name, t.ID, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	if l := s.d.Text.StreamLock; l != "" {
		if _, err := tx.ExecContext(ctx, s.q(l), "prompt:"+t.ID); err != nil {
			return fail(err)
		}
	}
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(version), 0) + 1 FROM agentry_prompts WHERE id = ?`), t.ID).Scan(&t.Version); err != nil {
		return fail(err)
	}
	t.CreatedAt = fromMicros(micros(s.now()))
	data, err := json.Marshal(t)
	if err != nil {
		return t, fmt.Errorf("%w: %s: %v", prompt.ErrInvalid, t.ID, err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO agentry_prompts (id, version, data, created_at) VALUES (?, ?, ?, ?)`),
		t.ID, t.Version, string(data), micros(t.CreatedAt)); err != nil {
		return fail(err)
	}
	if _, err := s.appendAudit(ctx, tx, store.AuditRecord{Time: t.CreatedAt, UserID: t.CreatedBy, Rule: "prompt.put", Decision: "put",
		Target: "prompt:" + t.Ref(), Reason: "a new version of the template"}); err != nil {
		return t, err
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return t, nil
}

func (p *prompts) List(ctx context.Context, f prompt.Filter) ([]prompt.Template, error) {
	s := (*DB)(p)
	query := `SELECT data FROM agentry_prompts`
	var where []string
	var args []any
	if f.ID != "" {
		where, args = append(where, "id = ?"), append(args, f.ID)
	}
	if !f.AllVersions {
		where = append(where, "version = (SELECT MAX(version) FROM agentry_prompts p2 WHERE p2.id = agentry_prompts.id)")
	}
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.db.QueryContext(ctx, s.q(query+" ORDER BY id, version"), args...)
	if err != nil {
		return nil, fmt.Errorf("prompt (%s): list: %w", s.d.Name, err)
	}
	defer rows.Close()
	var out []prompt.Template
	for rows.Next() {
		var data string
		var t prompt.Template
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("prompt (%s): list: %w", s.d.Name, err)
		}
		if err := json.Unmarshal([]byte(data), &t); err != nil {
			return nil, fmt.Errorf("prompt (%s): list: %w", s.d.Name, err)
		}
		if f.Matches(&t) {
			out = append(out, t)
		}
	}
	return out, rows.Err()
}
