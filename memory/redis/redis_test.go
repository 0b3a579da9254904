package redis_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memorytest"
	"github.com/agentry/agentry/memory/redis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Backend {
		b, err := memory.Open(context.Background(), testdb.Redis(t))
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// A server killed and started again: while it is down, calls fail naming
// the server; once it is back the client reconnects, and every write it
// acknowledged is there.
func TestServerRestart(t *testing.T) {
	srv := testdb.StartRedis(t)
	b, err := redis.Open(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	memorytest.Restart(t, b, srv.Stop, srv.Start, "memory (redis)", "refused")
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"redis://127.0.0.1:1/0", "refused"},
		{"redis://127.0.0.1:6379/notanumber", "invalid database number"},
	} {
		_, err := memory.Open(context.Background(), tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "memory (redis)") {
			t.Errorf("Open(%s) = %v, want %q", tc.dsn, err, tc.want)
		}
	}
}

func BenchmarkMemory(b *testing.B) {
	memorytest.Bench(b, func(b *testing.B) memory.Backend {
		m, err := memory.Open(context.Background(), testdb.Redis(b))
		if err != nil {
			b.Fatal(err)
		}
		return m
	})
}
