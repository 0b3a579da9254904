package testdb

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
)

// Temporal starts a Temporal dev server of the test's own (the Temporal
// CLI scripts/test-deps.sh builds, AGENTRY_TEST_TEMPORAL) on a free
// loopback port, its state in memory, stopped when the test ends, and
// returns it with a client of it; without the CLI the test is skipped,
// or fails under AGENTRY_REQUIRE_SERVICES (scripts/test.sh).
func Temporal(t testing.TB) (hostPort string, c client.Client) {
	t.Helper()
	bin := os.Getenv("AGENTRY_TEST_TEMPORAL")
	if st, err := os.Stat(bin); bin == "" || err != nil || st.IsDir() {
		missing(t, "no Temporal CLI in AGENTRY_TEST_TEMPORAL", "builds it")
	}
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	srv, err := testsuite.StartDevServer(context.Background(), testsuite.DevServerOptions{
		ExistingPath: bin, LogLevel: "error", Stdout: io.Discard, Stderr: io.Discard,
		ClientOptions: &client.Options{Logger: quiet},
	})
	if err != nil {
		t.Fatalf("the Temporal dev server did not start: %v", err)
	}
	t.Cleanup(func() {
		srv.Client().Close()
		srv.Stop()
	})
	return srv.FrontendHostPort(), srv.Client()
}
