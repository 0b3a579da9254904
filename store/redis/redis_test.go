package redis_test

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memorytest"
	"github.com/agentry/agentry/store/redis"
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
	ctx := context.Background()
	srv := testdb.StartRedis(t)
	b, err := redis.Open(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, db := b.Memory(), b.DB()
	for _, text := range []string{"one", "two", "three"} {
		if _, err := m.Append(ctx, memory.Entry{Stream: "s", Text: text}, memory.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Write(ctx, memory.Doc{Collection: "c", Key: "k", Value: map[string]any{"v": 1}}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err = m.Append(ctx, memory.Entry{Stream: "s", Text: "lost"}, memory.Retention{})
	if err == nil || !strings.Contains(err.Error(), "memory (redis)") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("an append while the server is down: %v", err)
	}
	srv.Start()
	if _, err := m.Append(ctx, memory.Entry{Stream: "s", Text: "four"}, memory.Retention{}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	got, err := m.Read(ctx, "s", memory.ReadOptions{})
	var texts []string
	for _, e := range got {
		texts = append(texts, e.Text)
	}
	if err != nil || strings.Join(texts, ",") != "one,two,three,four" {
		t.Errorf("after the restart: %q, %v", texts, err)
	}
	if d, err := db.Read(ctx, "c", "k"); err != nil || d.Value["v"] != 1.0 {
		t.Errorf("a document after the restart: %+v, %v", d, err)
	}
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
