package sqltool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostile is what a model bent on escaping sql_query writes, with the
// error type each must get ("" where the statement is harmless and
// runs).
type hostile struct{ name, sql, want string }

// Statements that must not pass on either engine, written the ways a
// keyword check is fooled: case, comments, leading space, CTEs,
// statements hidden after a ;, keywords in literals.
var common = []hostile{
	{"a write", "DELETE FROM people", "read_only"},
	{"a write in lower case after whitespace", " \n\t delete from people", "read_only"},
	{"a write after a comment", "/* just a select */ DELETE FROM people", "read_only"},
	{"a write after a line comment", "-- SELECT\nDELETE FROM people", "read_only"},
	{"a CTE with a data-modifying statement", "WITH d AS (DELETE FROM people RETURNING id) SELECT * FROM d", "read_only"},
	{"a CTE before a write", "WITH x AS (SELECT 1) INSERT INTO people (id, name) VALUES (9, 'x')", "read_only"},
	{"select into", "SELECT * INTO stolen FROM people", "read_only"},
	{"explain of a write", "EXPLAIN DELETE FROM people", "read_only"},
	{"a second statement", "SELECT 1; DELETE FROM people", "invalid_arguments"},
	{"a second statement after a comment", "SELECT 1 -- ;\n; DELETE FROM people", "invalid_arguments"},
	{"a second statement in a comment", "SELECT 1 /* ; DELETE FROM people */", ""},
	{"keywords in a string", "SELECT 'ATTACH; DELETE FROM people; COPY' AS s", ""},
	{"a quoted name", `SELECT "name" FROM people WHERE id = 1`, ""},
	{"values", "VALUES (1)", ""},
	{"a trailing semicolon", "SELECT 1;", ""},
	{"an unterminated comment", "SELECT 1 /* DELETE FROM people", "invalid_arguments"},
	{"an unterminated string", "SELECT 'x", "invalid_arguments"},
}

var sqliteHostile = []hostile{
	{"attach a file", "ATTACH DATABASE 'DIR/stolen.db' AS stolen", "read_only"},
	{"attach in lower case after a comment", "/**/attach 'DIR/stolen.db' as stolen", "read_only"},
	{"detach", "DETACH DATABASE main", "read_only"},
	{"pragma journal_mode", "PRAGMA journal_mode=DELETE", "read_only"},
	{"pragma query_only off", "PRAGMA query_only = 0", "read_only"},
	{"a pragma function that changes nothing but is not schema", "SELECT * FROM pragma_query_only", "read_only"},
	{"load_extension", "SELECT load_extension('DIR/x.so')", "refused"},
	{"replace into", "REPLACE INTO people (id, name) VALUES (1, 'x')", "read_only"},
	{"vacuum into a file", "VACUUM INTO 'DIR/stolen.db'", "read_only"},
	{"a bracketed name", "SELECT [name] FROM people WHERE id = 1", ""},
	{"the schema", "SELECT name FROM pragma_table_info('people') ORDER BY cid", ""},
}

var postgresHostile = []hostile{
	{"copy to program", "COPY people TO PROGRAM 'touch DIR/pwned'", "read_only"},
	{"copy a query to program", "copy (select 1) to program 'touch DIR/pwned'", "read_only"},
	{"copy to a file", "COPY people TO 'DIR/stolen'", "read_only"},
	{"copy after a nested comment", "/* /* */ SELECT */ COPY people TO STDOUT", "read_only"},
	{"pg_reload_conf", "select pg_reload_conf()", "refused"},
	{"pg_reload_conf qualified, in capitals", "SELECT PG_CATALOG.PG_RELOAD_CONF ( )", "refused"},
	{"pg_reload_conf quoted", `SELECT "pg_reload_conf"()`, "refused"},
	{"pg_reload_conf after a comment", "SELECT/**/pg_reload_conf/**/()", "refused"},
	{"sql in a string", "SELECT query_to_xml('select pg_reload_conf()', true, true, '')", "refused"},
	{"a server file", "SELECT pg_read_file('/etc/passwd')", "refused"},
	{"lo_export", "SELECT lo_export(1, 'DIR/stolen')", "refused"},
	{"set_config", "SELECT set_config('log_statement', 'none', false)", "refused"},
	{"an advisory lock held past the call", "SELECT pg_advisory_lock(1)", "refused"},
	{"unicode-escaped name", `SELECT U&"pg_reload_con\0066"()`, "invalid_arguments"},
	{"a second statement after an escaped quote", `SELECT E'\' ; DELETE FROM people --'`, ""},
	{"a second statement after a plain backslash", `SELECT '\' ; DELETE FROM people --'`, "invalid_arguments"},
	{"a dollar-quoted literal", "SELECT $x$ ; DELETE FROM people $x$ AS s", ""},
	{"parenthesized", "(SELECT 1) UNION (SELECT 2)", ""},
	{"show", "SHOW search_path", ""},
	{"table", "TABLE people", ""},
	{"explain", "EXPLAIN SELECT * FROM people", ""},
}

// sql_query as a hostile model would use it: nothing it runs writes,
// attaches, reaches a file or a program, or reconfigures the server.
func TestReadOnlyAgainstAHostileModel(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			q := setup(t, b.dsn(t), false)["sql_query"]
			cases := append(append([]hostile{}, common...), sqliteHostile...)
			if b.name == "postgres" {
				cases = append(append([]hostile{}, common...), postgresHostile...)
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					stmt := strings.ReplaceAll(tc.sql, "DIR", dir)
					out, err := call(q, stmt)
					if errType(err) != tc.want {
						t.Errorf("%s: %s, %v; want error type %q", stmt, out, err, tc.want)
					}
				})
			}
			if out, _ := call(q, "SELECT COUNT(*) AS n FROM people"); !strings.Contains(out, `"n":3`) {
				t.Errorf("the table changed: %s", out)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("files were made: %v", entries)
			}
		})
	}
}

// sql_exec changes tables, but never reaches outside them.
func TestExecStaysInTheDatabase(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			ex := setup(t, b.dsn(t), true)["sql_exec"]
			cases := []hostile{
				{"a semicolon in a string", "INSERT INTO people (id, name) VALUES (4, 'a;b')", ""},
				{"pg_reload_conf", "SELECT pg_reload_conf()", "refused"},
			}
			if b.name == "postgres" {
				cases = append(cases, hostile{"copy to program", "COPY people TO PROGRAM 'touch DIR/pwned'", "refused"},
					hostile{"a do block", "DO $$ BEGIN EXECUTE 'COPY people TO PROGRAM ''touch DIR/pwned'''; END $$", "refused"})
			} else {
				cases = append(cases, hostile{"attach", "ATTACH DATABASE 'DIR/stolen.db' AS stolen", "refused"},
					hostile{"pragma journal_mode", "PRAGMA journal_mode=DELETE", "refused"},
					hostile{"vacuum into a file", "VACUUM INTO 'DIR/stolen.db'", "refused"})
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					stmt := strings.ReplaceAll(tc.sql, "DIR", dir)
					if out, err := call(ex, stmt); errType(err) != tc.want {
						t.Errorf("%s: %s, %v; want error type %q", stmt, out, err, tc.want)
					}
				})
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("files were made: %v", entries)
			}
		})
	}
}

// A read-only connector never creates the database it is given.
func TestReadOnlyDoesNotCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	_, _, err := Tools(Options{DSN: path})
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Tools over a missing file = %v, want an error saying it opens read-only", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the file was created: %v", err)
	}
}

// A database file whose name holds '#', '?' or '%' is the file opened,
// by both tools.
func TestOddPaths(t *testing.T) {
	for _, name := range []string{"people#1.db", "people?mode=rw.db", "100%.db"} {
		t.Run(name, func(t *testing.T) {
			tools := setup(t, filepath.Join(t.TempDir(), name), true)
			if out, err := call(tools["sql_query"], "SELECT COUNT(*) AS n FROM people"); err != nil || !strings.Contains(out, `"n":3`) {
				t.Errorf("sql_query: %s, %v", out, err)
			}
		})
	}
}
