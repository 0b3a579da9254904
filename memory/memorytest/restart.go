package memorytest

import (
	"context"
	"strings"
	"testing"

	"github.com/agentry/agentry/memory"
)

// Restart checks a backend across its server's crash: while the server
// is down (stop) an append fails with an error holding each of want;
// once it is back (start) the client reconnects, and every entry and
// document it acknowledged before is there.
func Restart(t *testing.T, b memory.Backend, stop, start func(), want ...string) {
	t.Helper()
	ctx := context.Background()
	m, db := b.Memory(), b.DB()
	for _, text := range []string{"one", "two", "three"} {
		if _, err := m.Append(ctx, memory.Entry{Stream: "s", Text: text}, memory.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Write(ctx, memory.Doc{Collection: "c", Key: "k", Value: map[string]any{"v": 1}}); err != nil {
		t.Fatal(err)
	}
	stop()
	_, err := m.Append(ctx, memory.Entry{Stream: "s", Text: "lost"}, memory.Retention{})
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("an append while the server is down: %v; want %q in it", err, w)
		}
	}
	start()
	if _, err := m.Append(ctx, memory.Entry{Stream: "s", Text: "four"}, memory.Retention{}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	got, err := m.Read(ctx, "s", memory.ReadOptions{})
	if err != nil || texts(got) != "one,two,three,four" {
		t.Errorf("after the restart: %q, %v", texts(got), err)
	}
	if d, err := db.Read(ctx, "c", "k"); err != nil || d.Value["v"] != 1.0 {
		t.Errorf("a document after the restart: %+v, %v", d, err)
	}
}
