package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // "sqlite"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/prompt"
)

// Migration 5 makes prompt versions text and keeps the templates a
// store of the release before holds (integer versions, and "version": 1
// in their JSON): they are found as "1" and as "v1", and put goes on
// counting after them.
func TestPromptVersionsBecomeText(t *testing.T) {
	ctx := context.Background()
	for _, b := range []struct {
		name   string
		driver string
		dsn    func(testing.TB) string
		d      Dialect
	}{
		{"sqlite", "sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "old.db") },
			Dialect{Name: "sqlite", SeqKey: "INTEGER PRIMARY KEY", Text: SQLiteText()}},
		{"postgres", "pgx", testdb.Postgres,
			Dialect{Name: "postgres", Numbered: true, ForUpdate: " FOR UPDATE", SeqKey: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", Text: PostgresText()}},
	} {
		t.Run(b.name, func(t *testing.T) {
			db, err := sql.Open(b.driver, b.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			// The schema of the release before: migrations 1 to 4.
			stmts := []string{`CREATE TABLE agentry_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`}
			for v, m := range b.d.schema()[:4] {
				stmts = append(stmts, m, `INSERT INTO agentry_schema (version, applied_at) VALUES (`+string(rune('1'+v))+`, 0)`)
			}
			stmts = append(stmts, `INSERT INTO agentry_prompts (id, version, data, created_at) VALUES
				('greet', 1, '{"id": "greet", "version": 1, "text": "Hi ${name}.", "required_vars": ["name"]}', 0),
				('greet', 2, '{"id": "greet", "version": 2, "text": "Hello ${name}.", "required_vars": ["name"]}', 0)`)
			for _, q := range stmts {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			s, err := Open(ctx, db, b.d)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ps := s.Prompts()
			for _, tc := range []struct{ version, text, want string }{
				{"1", "Hi ${name}.", "1"}, {"v1", "Hi ${name}.", "1"}, {"", "Hello ${name}.", "2"},
			} {
				got, err := ps.Get(ctx, "greet", tc.version)
				if err != nil || got.Text != tc.text || got.Version != tc.want {
					t.Errorf("Get(greet, %q) = %+v, %v", tc.version, got, err)
				}
			}
			if got, err := ps.Put(ctx, prompt.Template{ID: "greet", Text: "Hey ${name}.", RequiredVars: []string{"name"}}); err != nil || got.Version != "3" {
				t.Errorf("Put after the migration = %q, %v; want 3", got.Version, err)
			}
		})
	}
}
