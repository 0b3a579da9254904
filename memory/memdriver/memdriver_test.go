package memdriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/memdriver"
)

// TestStampSeals: an entry stamped in an Append given a seal stores the
// text sealed to its id, whether the backend knows the id first (Stamp)
// or learns it on insert (TextFor); without a seal the text is kept.
func TestStampSeals(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	sealed := memdriver.WithSeal(context.Background(), func(id int64) string { return "sealed-to-" + string(rune('0'+id)) })
	plain := context.Background()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		id       int64
		wantText string
		textFor  bool
		wantFor  string
	}{
		{"sealed, id known", sealed, 7, "sealed-to-7", true, "sealed-to-7"},
		{"sealed, id learnt on insert", sealed, 0, "text", true, "sealed-to-7"},
		{"plain", plain, 7, "text", false, "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := memdriver.Stamp(tc.ctx, memory.Entry{Stream: "s", Text: "text"}, memory.Retention{TTL: time.Hour}, tc.id, now)
			if e.Text != tc.wantText || e.ID != tc.id || !e.Time.Equal(now.Truncate(time.Microsecond)) || !e.Expires.Equal(e.Time.Add(time.Hour)) {
				t.Errorf("Stamp = %+v", e)
			}
			if got, ok := memdriver.TextFor(tc.ctx, e, 7); got != tc.wantFor || ok != tc.textFor {
				t.Errorf("TextFor = %q, %v; want %q, %v", got, ok, tc.wantFor, tc.textFor)
			}
		})
	}
}

// TestChecks: what every backend refuses, refused the same way.
func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"an entry without a stream", memdriver.CheckEntry(memory.Entry{Text: "x"}, memory.Retention{})},
		{"an empty entry", memdriver.CheckEntry(memory.Entry{Stream: "s"}, memory.Retention{})},
		{"a read without a stream", memdriver.CheckRead("", memory.ReadOptions{})},
		{"an empty collection name", memdriver.CheckName("collection", "")},
		{"a name over 200 bytes", memdriver.CheckName("stream", strings.Repeat("s", 201))},
		{"a query on a bad field", memdriver.CheckQuery(memory.Query{Where: []memory.Filter{{Field: "a..b", Op: memory.Eq, Value: 1}}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Errorf("accepted")
			}
		})
	}
}
