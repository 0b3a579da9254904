package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/store"
)

// Prompts returns the store's prompt templates (the table of migrations
// 4 and 5): each Put is audited in the same transaction.
func (s *DB) Prompts() prompt.Store { return (*prompts)(s) }

type prompts DB

// versions are the versions of id, as stored.
func (p *prompts) versions(ctx context.Context, q querier, id string) ([]string, error) {
	s := (*DB)(p)
	rows, err := q.QueryContext(ctx, s.q(`SELECT version FROM agentry_prompts WHERE id = ?`), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (p *prompts) Get(ctx context.Context, id string, version string) (prompt.Template, error) {
	s := (*DB)(p)
	ref := id
	if version != "" {
		ref += "@" + version
	}
	fail := func(err error) (prompt.Template, error) {
		return prompt.Template{}, fmt.Errorf("prompt (%s): get %s: %w", s.d.Name, ref, err)
	}
	have, err := p.versions(ctx, s.db, id)
	if err != nil {
		return fail(err)
	}
	found, err := prompt.Pick(id, version, have)
	if err != nil {
		return prompt.Template{}, err
	}
	var data string
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT data FROM agentry_prompts WHERE id = ? AND version = ?`), id, found).Scan(&data); err != nil {
		return fail(err)
	}
	return decodeTemplate(data, found, s.d.Name)
}

// decodeTemplate reads a stored template; the column is its version (a
// row stored before versions were strings says 3 in its JSON).
func decodeTemplate(data, version, backend string) (prompt.Template, error) {
	var t prompt.Template
	if err := json.Unmarshal([]byte(data), &t); err != nil {
		return t, fmt.Errorf("prompt (%s): %s@%s: %w", backend, t.ID, version, err)
	}
	t.Version = version
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
	tx, done, err := s.beginWrite(ctx)
	if err != nil {
		return fail(err)
	}
	defer done()
	defer tx.Rollback()
	if l := s.d.Text.streamLock; l != "" {
		if _, err := tx.ExecContext(ctx, s.q(l), "prompt:"+t.ID); err != nil {
			return fail(err)
		}
	}
	have, err := p.versions(ctx, tx, t.ID)
	if err != nil {
		return fail(err)
	}
	switch {
	case t.Version == "":
		if t.Version, err = prompt.NextVersion(t.ID, have); err != nil {
			return t, err
		}
	case slices.Contains(have, t.Version):
		return t, fmt.Errorf("%w: %s exists, and a version never changes: put it under a new version", prompt.ErrInvalid, t.Ref())
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

// List reads the templates f selects and keeps the latest of each id
// unless f.AllVersions: versions are ordered by prompt.CompareVersions,
// which SQL cannot do.
func (p *prompts) List(ctx context.Context, f prompt.Filter) ([]prompt.Template, error) {
	s := (*DB)(p)
	query, args := `SELECT version, data FROM agentry_prompts`, []any{}
	if f.ID != "" {
		query, args = query+" WHERE id = ?", append(args, f.ID)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("prompt (%s): list: %w", s.d.Name, err)
	}
	defer rows.Close()
	var all []prompt.Template
	for rows.Next() {
		var version, data string
		if err := rows.Scan(&version, &data); err != nil {
			return nil, fmt.Errorf("prompt (%s): list: %w", s.d.Name, err)
		}
		t, err := decodeTemplate(data, version, s.d.Name)
		if err != nil {
			return nil, err
		}
		all = append(all, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("prompt (%s): list: %w", s.d.Name, err)
	}
	return prompt.Select(all, f), nil
}
