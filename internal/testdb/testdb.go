// Package testdb gives tests real databases: a fresh Postgres schema on
// the server scripts/test-deps.sh started (AGENTRY_TEST_POSTGRES), or a
// SQLite file in the test's temporary directory.
package testdb

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
)

// Postgres returns the URL of an empty schema of its own on the test
// server, dropped when the test ends. Without a server it skips the test,
// or fails it when AGENTRY_REQUIRE_SERVICES is set (as scripts/test.sh
// sets it), so that a missing server can never pass as a green run.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv("AGENTRY_TEST_POSTGRES")
	if base == "" {
		missing(t, "AGENTRY_TEST_POSTGRES is not set", "starts Postgres")
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := "t_" + strconv.FormatUint(rand.Uint64(), 36)
	if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		db.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// missing fails the test for want of a service (what), or skips it when
// AGENTRY_REQUIRE_SERVICES is not set; does says what scripts/test.sh
// does about it.
func missing(t testing.TB, what, does string) {
	t.Helper()
	if os.Getenv("AGENTRY_REQUIRE_SERVICES") != "" {
		t.Fatalf("%s: run the tests with scripts/test.sh, which %s", what, does)
	}
	t.Skipf("%s (scripts/test.sh %s)", what, does)
}

// SQLite returns the path of a new SQLite file in the test's temporary
// directory.
func SQLite(t testing.TB) string {
	return filepath.Join(t.TempDir(), "agentry.db")
}
