package sqlstore

import (
	"fmt"
	"strings"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memdriver"
)

// TextDialect is what differs between the backends for memory and
// documents: the JSON column, the text index, the search queries and the
// filters on JSON fields. Its contents are this package's: a Dialect
// takes SQLiteText or PostgresText.
type TextDialect struct {
	jsonType  string // the type of the documents' value column
	searchDDL string // creates the text indexes, in migration 3
	// streamLock, when set, runs first in an append's transaction with
	// the stream as argument, so that appends to one stream (and their
	// retention) happen one at a time.
	streamLock string

	searchEntries string // arguments: match, stream, now, limit
	searchDocs    string // arguments: match, collection, limit
	match         func(terms []string) string
	jsonParam     func(data []byte) any
	filter        func(path []string, f memory.Filter) (string, []any)
	order         func(path []string, desc bool) string
}

// ops are the comparisons filters may use, as SQL.
var ops = map[memory.Op]string{memory.Eq: "=", memory.Ne: "<>", memory.Lt: "<", memory.Lte: "<=", memory.Gt: ">", memory.Gte: ">="}

func desc(d bool) string {
	if d {
		return " DESC"
	}
	return ""
}

// SQLiteText returns SQLite's text dialect: JSON as text, FTS5 tables kept
// by triggers, ranked by bm25.
func SQLiteText() TextDialect { return sqliteText }

// PostgresText returns Postgres's text dialect: JSONB, tsvector columns with
// GIN indexes, ranked by ts_rank; strings compare byte by byte
// (COLLATE "C"), as Go compares them.
func PostgresText() TextDialect { return postgresText }

var sqliteText = TextDialect{
	jsonType: "TEXT",
	searchDDL: `CREATE VIRTUAL TABLE agentry_memory_fts USING fts5(text, content='agentry_memory', content_rowid='id', tokenize='porter unicode61');
	CREATE TRIGGER agentry_memory_ai AFTER INSERT ON agentry_memory BEGIN
		INSERT INTO agentry_memory_fts (rowid, text) VALUES (new.id, new.text);
	END;
	CREATE TRIGGER agentry_memory_ad AFTER DELETE ON agentry_memory BEGIN
		INSERT INTO agentry_memory_fts (agentry_memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
	END;
	CREATE VIRTUAL TABLE agentry_docs_fts USING fts5(text, content='agentry_docs', content_rowid='rowid', tokenize='porter unicode61');
	CREATE TRIGGER agentry_docs_ai AFTER INSERT ON agentry_docs BEGIN
		INSERT INTO agentry_docs_fts (rowid, text) VALUES (new.rowid, new.text);
	END;
	CREATE TRIGGER agentry_docs_ad AFTER DELETE ON agentry_docs BEGIN
		INSERT INTO agentry_docs_fts (agentry_docs_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
	END;
	CREATE TRIGGER agentry_docs_au AFTER UPDATE ON agentry_docs BEGIN
		INSERT INTO agentry_docs_fts (agentry_docs_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
		INSERT INTO agentry_docs_fts (rowid, text) VALUES (new.rowid, new.text);
	END;`,
	searchEntries: `SELECT m.id, m.stream, m.kind, m.text, m.run_id, m.agent, m.user_id, m.at, m.expires, -bm25(agentry_memory_fts) AS score
		FROM agentry_memory_fts JOIN agentry_memory m ON m.id = agentry_memory_fts.rowid
		WHERE agentry_memory_fts MATCH ? AND m.stream = ? AND (m.expires = 0 OR m.expires > ?)
		ORDER BY score DESC, m.id DESC LIMIT ?`,
	searchDocs: `SELECT d.collection, d.doc_key, d.value, d.run_id, d.agent, d.user_id, d.at, -bm25(agentry_docs_fts) AS score
		FROM agentry_docs_fts JOIN agentry_docs d ON d.rowid = agentry_docs_fts.rowid
		WHERE agentry_docs_fts MATCH ? AND d.collection = ?
		ORDER BY score DESC, d.doc_key LIMIT ?`,
	// Each term quoted (FTS5 syntax stays out of it), any of them.
	match: func(terms []string) string {
		q := make([]string, len(terms))
		for i, t := range terms {
			q[i] = `"` + t + `"`
		}
		return strings.Join(q, " OR ")
	},
	jsonParam: func(data []byte) any { return string(data) },
	filter: func(path []string, f memory.Filter) (string, []any) {
		p := "$." + strings.Join(path, ".")
		if b, ok := f.Value.(bool); ok {
			want := b == (f.Op == memory.Eq)
			return "json_type(value, ?) = ?", []any{p, fmt.Sprint(want)}
		}
		if n, ok := memdriver.Number(f.Value); ok {
			return "(json_type(value, ?) IN ('integer', 'real') AND json_extract(value, ?) " + ops[f.Op] + " ?)", []any{p, p, n}
		}
		return "(json_type(value, ?) = 'text' AND json_extract(value, ?) " + ops[f.Op] + " ?)", []any{p, p, f.Value}
	},
	order: func(path []string, d bool) string {
		x := "json_extract(value, '$." + strings.Join(path, ".") + "')" // the path is checked: names and dots only
		return x + " IS NULL, " + x + desc(d) + ", doc_key" + desc(d)
	},
}

var postgresText = TextDialect{
	jsonType: "JSONB",
	searchDDL: `ALTER TABLE agentry_memory ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED;
	CREATE INDEX agentry_memory_tsv ON agentry_memory USING GIN (tsv);
	ALTER TABLE agentry_docs ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED;
	CREATE INDEX agentry_docs_tsv ON agentry_docs USING GIN (tsv);`,
	streamLock: `SELECT pg_advisory_xact_lock(hashtext(?))`,
	searchEntries: `SELECT id, stream, kind, text, run_id, agent, user_id, at, expires, ts_rank(tsv, q) AS score
		FROM agentry_memory, to_tsquery('english', ?) q
		WHERE tsv @@ q AND stream = ? AND (expires = 0 OR expires > ?)
		ORDER BY score DESC, id DESC LIMIT ?`,
	searchDocs: `SELECT collection, doc_key, value, run_id, agent, user_id, at, ts_rank(tsv, q) AS score
		FROM agentry_docs, to_tsquery('english', ?) q
		WHERE tsv @@ q AND collection = ?
		ORDER BY score DESC, doc_key LIMIT ?`,
	// Terms are letters and digits only (memdriver.Terms): any of them.
	match:     func(terms []string) string { return strings.Join(terms, " | ") },
	jsonParam: func(data []byte) any { return data },
	filter: func(path []string, f memory.Filter) (string, []any) {
		x := "(value #> '{" + strings.Join(path, ",") + "}')" // the path is checked: names and dots only
		if b, ok := f.Value.(bool); ok {
			return x + " = to_jsonb(?::boolean)", []any{b == (f.Op == memory.Eq)}
		}
		if n, ok := memdriver.Number(f.Value); ok {
			return "(jsonb_typeof(" + x + ") = 'number' AND " + x + " " + ops[f.Op] + " to_jsonb(?::numeric))", []any{n}
		}
		return "(jsonb_typeof(" + x + ") = 'string' AND (" + x + ` #>> '{}') COLLATE "C" ` + ops[f.Op] + " ?::text)", []any{f.Value}
	},
	order: func(path []string, d bool) string {
		x := "(value #> '{" + strings.Join(path, ",") + "}')"
		return x + " IS NULL, CASE WHEN jsonb_typeof(" + x + ") = 'string' THEN " + x + ` #>> '{}' END COLLATE "C"` + desc(d) +
			", " + x + desc(d) + ", doc_key" + desc(d)
	},
}
