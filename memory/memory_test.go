package memory_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Open names the package to import for a backend that is not registered
// (here redis and postgres: the package's tests import only store/sqlite).
func TestOpenUnregistered(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"redis://127.0.0.1:1/0", "no redis backend is registered (import github.com/agentry/agentry/memory/redis;"},
		{"postgres://db/x", "no postgres backend is registered (import github.com/agentry/agentry/store/postgres;"},
	} {
		_, err := memory.Open(context.Background(), c.dsn)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", c.dsn, err, c.want)
		}
	}
}
