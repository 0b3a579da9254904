package sqltool

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var backends = []struct {
	name  string
	dsn   func(testing.TB) string
	ph    func(int) string // placeholder n
	sleep string           // a statement that takes long
}{
	{"sqlite", testdb.SQLite, func(int) string { return "?" },
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"},
	{"postgres", testdb.Postgres, func(n int) string { return "$" + string(rune('0'+n)) }, "SELECT pg_sleep(5)"},
}

func setup(t *testing.T, dsn string, write bool) map[string]tool.Tool {
	t.Helper()
	return setupWith(t, dsn, Options{Write: write, MaxRows: 2})
}

// setupWith makes the people table at dsn and returns the tools o gives
// over it.
func setupWith(t *testing.T, dsn string, o Options) map[string]tool.Tool {
	t.Helper()
	driver, d := "sqlite", fileURI(dsn, "")
	if strings.HasPrefix(dsn, "postgres") {
		driver, d = "pgx", dsn
	}
	db, err := sql.Open(driver, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)`,
		`INSERT INTO people (id, name) VALUES (1, 'Ada'), (2, 'Grace'), (3, 'Edsger')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	o.DSN = dsn
	tools, closeFn, err := Tools(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFn() })
	m := map[string]tool.Tool{}
	for _, tl := range tools {
		m[tl.Info().Name] = tl
	}
	return m
}

func call(tl tool.Tool, sqlText string, params ...any) (string, error) {
	args, _ := json.Marshal(map[string]any{"sql": sqlText, "params": params})
	out, err := tl.Call(context.Background(), args)
	return string(out), err
}

func errType(err error) string {
	var d *tool.ErrorDetails
	if errors.As(err, &d) {
		return d.Type
	}
	return ""
}

func TestSQL(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			tools := setup(t, b.dsn(t), false)
			if _, ok := tools["sql_exec"]; ok {
				t.Error("sql_exec exists though writes are off")
			}
			q := tools["sql_query"]
			out, err := call(q, "SELECT name FROM people WHERE id = "+b.ph(1), 2)
			if err != nil || !strings.Contains(out, `"name":"Grace"`) {
				t.Errorf("a parameterized query: %s, %v", out, err)
			}
			// A value is a value, never SQL.
			out, err = call(q, "SELECT name FROM people WHERE name = "+b.ph(1), "x' OR '1'='1")
			if err != nil || strings.Contains(out, "Ada") {
				t.Errorf("an injection as a parameter: %s, %v", out, err)
			}
			out, err = call(q, "SELECT name FROM people ORDER BY id")
			if err != nil || !strings.Contains(out, `"truncated":true`) || strings.Contains(out, "Edsger") {
				t.Errorf("the row cap: %s, %v", out, err)
			}
			for _, tc := range []struct{ name, sql, want string }{
				{"a write", "DELETE FROM people", "read_only"},
				{"two statements", "SELECT 1; DELETE FROM people", "invalid_arguments"},
				{"empty", "  ", "invalid_arguments"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if _, err := call(q, tc.sql); errType(err) != tc.want {
						t.Errorf("%s: %v, want a %s error", tc.sql, err, tc.want)
					}
				})
			}
			if out, _ := call(q, "SELECT COUNT(*) AS n FROM people"); !strings.Contains(out, `"n":3`) {
				t.Errorf("a refused write changed the table: %s", out)
			}
		})
	}
}

// A statement over its time is a timeout, whichever ends it first: the
// context, or Postgres's own statement_timeout (SQLSTATE 57014), which
// is set to the same bound.
func TestSQLTimeout(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			q := setupWith(t, b.dsn(t), Options{Timeout: 300 * time.Millisecond})["sql_query"]
			for range 3 {
				if _, err := call(q, b.sleep); errType(err) != "timeout" {
					t.Fatalf("%s: %v, want a timeout error", b.sleep, err)
				}
			}
		})
	}
}

func TestSQLWrite(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			tools := setup(t, b.dsn(t), true)
			ex := tools["sql_exec"]
			if ex.Info().Idempotency != tool.NonIdempotent {
				t.Errorf("sql_exec is %s", ex.Info().Idempotency)
			}
			out, err := call(ex, "UPDATE people SET name = "+b.ph(1)+" WHERE id = "+b.ph(2), "Ada L.", 1)
			if err != nil || !strings.Contains(out, `"rows_affected":1`) {
				t.Errorf("sql_exec: %s, %v", out, err)
			}
			if out, _ := call(tools["sql_query"], "SELECT name FROM people WHERE id = 1"); !strings.Contains(out, "Ada L.") {
				t.Errorf("after the update: %s", out)
			}
			// sql_query stays read-only on the same connections.
			if _, err := call(tools["sql_query"], "DELETE FROM people"); errType(err) != "read_only" {
				t.Errorf("sql_query after sql_exec wrote: %v", err)
			}
			if _, err := call(ex, "SELECT 1; DROP TABLE people"); errType(err) != "invalid_arguments" {
				t.Errorf("two statements through sql_exec: %v", err)
			}
		})
	}
	if _, _, err := Tools(Options{}); err == nil || !strings.Contains(err.Error(), "dsn") {
		t.Errorf("no dsn: %v", err)
	}
}

// The connector's close releases its database: a call after it fails
// naming why.
func TestConnectorClose(t *testing.T) {
	dsn := testdb.SQLite(t)
	setup(t, dsn, false)
	cfg, _ := json.Marshal(map[string]any{"dsn": dsn})
	tools, closeFn, err := tool.OpenConnector("sql", cfg, t.TempDir())
	if err != nil || closeFn == nil || len(tools) != 1 {
		t.Fatalf("OpenConnector = %d tools, close %v, %v", len(tools), closeFn != nil, err)
	}
	if _, err := call(tools[0], "SELECT name FROM people WHERE id = ?", 1); err != nil {
		t.Fatal(err)
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}
	if _, err := call(tools[0], "SELECT name FROM people WHERE id = ?", 1); err == nil || !strings.Contains(err.Error(), "database is closed") {
		t.Errorf("a query after close = %v", err)
	}
}
