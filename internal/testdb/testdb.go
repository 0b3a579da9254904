// Package testdb gives tests real databases: a fresh Postgres schema on
// the server scripts/test-deps.sh started (AGENTRY_TEST_POSTGRES), or a
// SQLite file in the test's temporary directory.
package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
// does about it. The first skip of a test binary also says, in one line
// on the terminal, which suites the run leaves out.
func missing(t testing.TB, what, does string) {
	t.Helper()
	if os.Getenv("AGENTRY_REQUIRE_SERVICES") != "" {
		t.Fatalf("%s: run the tests with scripts/test.sh, which %s", what, does)
	}
	announce.Do(func() { announceSkips(os.Args[0]) })
	t.Skipf("%s (scripts/test.sh %s)", what, does)
}

var announce sync.Once

// announceSkips writes one line naming the suites this run skips. go test
// shows what a passing package prints only with -v, so a skip would pass
// unnoticed as green: the line goes to the terminal (/dev/tty), and to
// the test's own stderr when there is none (shown with -v, or when the
// package fails). A result go test replays from its cache is silent: the
// package line then says "(cached)".
func announceSkips(binary string) {
	var suites []string
	for _, s := range []struct{ name, env string }{{"Postgres", "AGENTRY_TEST_POSTGRES"}, {"Redis", "AGENTRY_TEST_REDIS"}} {
		if os.Getenv(s.env) == "" {
			suites = append(suites, s.name+" ("+s.env+" unset)")
		}
	}
	if len(suites) == 0 {
		suites = []string{"some server (one is not installed)"}
	}
	line := fmt.Sprintf("SKIPPED in %s: the suites that need %s; scripts/test.sh runs them\n",
		strings.TrimSuffix(filepath.Base(binary), ".test"), strings.Join(suites, " and "))
	w := io.Writer(os.Stderr)
	if f, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer f.Close()
		w = f
	}
	io.WriteString(w, line)
}

// SQLite returns the path of a new SQLite file in the test's temporary
// directory.
func SQLite(t testing.TB) string {
	return filepath.Join(t.TempDir(), "agentry.db")
}

// Commands fails or skips the test (as a missing service does) unless
// every named command is on PATH: the tools a test runs as a user would
// (curl, jq), which scripts/test-deps.sh installs.
func Commands(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			missing(t, name+" is not installed", "installs it from Debian's packages")
		}
	}
}
