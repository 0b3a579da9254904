// Package memorytest is the conformance suite of memory backends: every
// backend runs it against a real server or file, so that what one
// guarantees, all do.
package memorytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/memseal"
	"github.com/agentry/agentry/memory"
)

// Run runs the suite. open returns a new, empty backend for one test;
// the suite closes it.
func Run(t *testing.T, open func(t *testing.T) memory.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b memory.Backend)
	}{
		{"AppendAndRead", testAppendAndRead},
		{"ReadOptions", testReadOptions},
		{"Retention", testRetention},
		{"TTL", testTTL},
		{"Search", testSearch},
		{"StreamsApart", testStreamsApart},
		{"Clear", testClear},
		{"ConcurrentAppends", testConcurrentAppends},
		{"BadRequests", testBadRequests},
		{"WriteAndRead", testWriteAndRead},
		{"Query", testQuery},
		{"SearchDocs", testSearchDocs},
		{"ConcurrentWrites", testConcurrentWrites},
		{"SealedRoundTrip", testSealedRoundTrip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, b)
		})
	}
}

func appendAll(t *testing.T, m memory.Memory, stream string, keep memory.Retention, texts ...string) []memory.Entry {
	t.Helper()
	var out []memory.Entry
	for _, text := range texts {
		e, err := m.Append(context.Background(), memory.Entry{Stream: stream, Kind: "note", Text: text, RunID: "run_1", Agent: "a", UserID: "ada"}, keep)
		if err != nil {
			t.Fatalf("Append(%q): %v", text, err)
		}
		out = append(out, e)
	}
	return out
}

func texts(es []memory.Entry) string { return join(es, func(e memory.Entry) string { return e.Text }) }

// join lists a field of each of xs, comma-separated.
func join[T any](xs []T, field func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = field(x)
	}
	return strings.Join(s, ",")
}

func testAppendAndRead(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	before := time.Now().Add(-time.Second)
	got := appendAll(t, m, "user:ada", memory.Retention{}, "one", "two", "three")
	for i, e := range got {
		if e.Time.Before(before) || e.Time.After(time.Now().Add(time.Second)) || e.Stream != "user:ada" {
			t.Errorf("entry %d as stored: %+v", i, e)
		}
		if i > 0 && e.ID <= got[i-1].ID {
			t.Errorf("ids do not increase: %d after %d", e.ID, got[i-1].ID)
		}
	}
	read, err := m.Read(ctx, "user:ada", memory.ReadOptions{})
	if err != nil || texts(read) != "one,two,three" {
		t.Fatalf("Read = %q, %v", texts(read), err)
	}
	r := read[0]
	if r.ID != got[0].ID || r.Kind != "note" || r.RunID != "run_1" || r.Agent != "a" || r.UserID != "ada" || !r.Time.Equal(got[0].Time) {
		t.Errorf("read back %+v, appended %+v", r, got[0])
	}
	if none, err := m.Read(ctx, "user:nobody", memory.ReadOptions{}); err != nil || len(none) != 0 {
		t.Errorf("a stream never written: %v, %v", none, err)
	}
}

func testReadOptions(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	es := appendAll(t, m, "s", memory.Retention{}, "a")
	time.Sleep(3 * time.Millisecond)
	es = append(es, appendAll(t, m, "s", memory.Retention{}, "b")...)
	time.Sleep(3 * time.Millisecond)
	es = append(es, appendAll(t, m, "s", memory.Retention{}, "c", "d")...)
	for _, tc := range []struct {
		name string
		o    memory.ReadOptions
		want string
	}{
		{"all", memory.ReadOptions{}, "a,b,c,d"},
		{"newest", memory.ReadOptions{Order: memory.Newest}, "d,c,b,a"},
		{"first two", memory.ReadOptions{Limit: 2}, "a,b"},
		{"last two", memory.ReadOptions{Limit: 2, Order: memory.Newest}, "d,c"},
		{"since b", memory.ReadOptions{Since: es[1].Time}, "b,c,d"},
		{"until c", memory.ReadOptions{Until: es[2].Time}, "a,b"},
		{"between", memory.ReadOptions{Since: es[1].Time, Until: es[2].Time}, "b"},
	} {
		got, err := m.Read(ctx, "s", tc.o)
		if err != nil || texts(got) != tc.want {
			t.Errorf("%s: Read = %q, %v; want %q", tc.name, texts(got), err, tc.want)
		}
	}
}

func testRetention(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	appendAll(t, m, "kept", memory.Retention{MaxEntries: 3}, "1", "2", "3", "4", "5")
	appendAll(t, m, "other", memory.Retention{}, "x")
	got, err := m.Read(ctx, "kept", memory.ReadOptions{})
	if err != nil || texts(got) != "3,4,5" {
		t.Errorf("a stream that keeps 3: %q, %v", texts(got), err)
	}
	if hits, _ := m.Search(ctx, "1", memory.SearchOptions{Stream: "kept"}); len(hits) != 0 {
		t.Errorf("a search found a dropped entry: %+v", hits)
	}
	if got, _ := m.Read(ctx, "other", memory.ReadOptions{}); texts(got) != "x" {
		t.Errorf("retention of one stream touched another: %q", texts(got))
	}
}

func testTTL(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	short := appendAll(t, m, "s", memory.Retention{TTL: 20 * time.Millisecond}, "fleeting thought")
	appendAll(t, m, "s", memory.Retention{}, "lasting thought")
	if short[0].Expires.IsZero() || !short[0].Expires.Equal(short[0].Time.Add(20*time.Millisecond)) {
		t.Errorf("expiry of the entry: %+v", short[0])
	}
	time.Sleep(40 * time.Millisecond)
	got, err := m.Read(ctx, "s", memory.ReadOptions{})
	if err != nil || texts(got) != "lasting thought" {
		t.Errorf("after the TTL: %q, %v", texts(got), err)
	}
	hits, err := m.Search(ctx, "thought", memory.SearchOptions{Stream: "s"})
	if err != nil || len(hits) != 1 || hits[0].Text != "lasting thought" {
		t.Errorf("search after the TTL: %+v, %v", hits, err)
	}
}

// corpus is a stream whose searches have known answers.
var corpus = []string{
	"Ada prefers window seats on long flights",
	"The user's favourite colour is green",
	"Lisbon trip planned for three days in May",
	"Ada is allergic to peanuts",
	"Booked a hotel in Porto near the river",
	"Ada flew to Lisbon last year",
}

func testSearch(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	appendAll(t, m, "user:ada", memory.Retention{}, corpus...)
	for _, tc := range []struct {
		query string
		want  []string // the hits, best first; a prefix of them when all is false
		all   bool
	}{
		{"which seat does she prefer", []string{corpus[0]}, true},
		{"favourite colour", []string{corpus[1]}, true},
		{"peanut allergy", []string{corpus[3]}, true},
		{"a hotel in Porto", []string{corpus[4]}, true},
		{"Lisbon trip", []string{corpus[2], corpus[5]}, true},
		{"submarines", nil, true},
		{"the of and", nil, true},
		{"Ada", []string{}, false},
	} {
		hits, err := m.Search(ctx, tc.query, memory.SearchOptions{Stream: "user:ada"})
		if err != nil {
			t.Fatalf("Search(%q): %v", tc.query, err)
		}
		var got []string
		for i, h := range hits {
			got = append(got, h.Text)
			if i > 0 && h.Score > hits[i-1].Score {
				t.Errorf("Search(%q): not best first: %+v", tc.query, hits)
			}
			if h.RunID != "run_1" || h.ID == 0 {
				t.Errorf("Search(%q): a hit without its entry: %+v", tc.query, h.Entry)
			}
		}
		if tc.all && !slices.Equal(got, tc.want) {
			t.Errorf("Search(%q) = %q, want %q", tc.query, got, tc.want)
		}
		if tc.query == "Ada" && len(got) != 3 {
			t.Errorf("Search(Ada) = %q, want the three entries about Ada", got)
		}
	}
	if hits, _ := m.Search(ctx, "Ada", memory.SearchOptions{Stream: "user:ada", Limit: 2}); len(hits) != 2 {
		t.Errorf("a search limited to 2 found %d", len(hits))
	}
}

func testStreamsApart(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	appendAll(t, m, "user:ada", memory.Retention{}, "the secret word is swordfish")
	appendAll(t, m, "user:bob", memory.Retention{}, "bob likes tea")
	if hits, err := m.Search(ctx, "swordfish secret", memory.SearchOptions{Stream: "user:bob"}); err != nil || len(hits) != 0 {
		t.Errorf("bob's search found ada's entry: %+v, %v", hits, err)
	}
	if got, _ := m.Read(ctx, "user:bob", memory.ReadOptions{}); texts(got) != "bob likes tea" {
		t.Errorf("bob's stream: %q", texts(got))
	}
}

func testClear(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	appendAll(t, m, "gone", memory.Retention{}, "forget me")
	appendAll(t, m, "stays", memory.Retention{}, "keep me")
	if err := m.Clear(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Read(ctx, "gone", memory.ReadOptions{}); len(got) != 0 {
		t.Errorf("after Clear: %q", texts(got))
	}
	if hits, _ := m.Search(ctx, "forget", memory.SearchOptions{Stream: "gone"}); len(hits) != 0 {
		t.Errorf("search after Clear: %+v", hits)
	}
	if got, _ := m.Read(ctx, "stays", memory.ReadOptions{}); texts(got) != "keep me" {
		t.Errorf("Clear touched another stream: %q", texts(got))
	}
	appendAll(t, m, "gone", memory.Retention{}, "new start")
	if got, _ := m.Read(ctx, "gone", memory.ReadOptions{}); texts(got) != "new start" {
		t.Errorf("a cleared stream written again: %q", texts(got))
	}
}

func testConcurrentAppends(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m := b.Memory()
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := m.Append(ctx, memory.Entry{Stream: "busy", Text: fmt.Sprintf("w%d-%d", w, i)}, memory.Retention{MaxEntries: 100}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := m.Read(ctx, "busy", memory.ReadOptions{})
	if err != nil || len(got) != 100 {
		t.Fatalf("%d entries kept of %d, want 100 (%v)", len(got), writers*each, err)
	}
	seen := map[int64]bool{}
	last := map[string]int{}
	for i, e := range got {
		if seen[e.ID] || i > 0 && e.ID <= got[i-1].ID {
			t.Fatalf("ids out of order or repeated at %d: %d", i, e.ID)
		}
		seen[e.ID] = true
		var w, n int
		fmt.Sscanf(e.Text, "w%d-%d", &w, &n)
		if prev, ok := last[fmt.Sprint(w)]; ok && n <= prev {
			t.Errorf("writer %d's entries out of order: %d after %d", w, n, prev)
		}
		last[fmt.Sprint(w)] = n
	}
}

func testBadRequests(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	m, db := b.Memory(), b.DB()
	for name, err := range map[string]error{
		"append to no stream":  second(m.Append(ctx, memory.Entry{Text: "x"}, memory.Retention{})),
		"append no text":       second(m.Append(ctx, memory.Entry{Stream: "s"}, memory.Retention{})),
		"negative retention":   second(m.Append(ctx, memory.Entry{Stream: "s", Text: "x"}, memory.Retention{MaxEntries: -1})),
		"read no stream":       second(m.Read(ctx, "", memory.ReadOptions{})),
		"negative limit":       second(m.Read(ctx, "s", memory.ReadOptions{Limit: -1})),
		"search no stream":     second(m.Search(ctx, "x", memory.SearchOptions{})),
		"clear no stream":      m.Clear(ctx, ""),
		"write no key":         second(db.Write(ctx, memory.Doc{Collection: "c", Value: map[string]any{}})),
		"write no value":       second(db.Write(ctx, memory.Doc{Collection: "c", Key: "k"})),
		"bad field":            second(db.Query(ctx, "c", memory.Query{Where: []memory.Filter{{Field: "a b", Op: memory.Eq, Value: 1}}})),
		"bad op":               second(db.Query(ctx, "c", memory.Query{Where: []memory.Filter{{Field: "a", Op: "~", Value: 1}}})),
		"range on a bool":      second(db.Query(ctx, "c", memory.Query{Where: []memory.Filter{{Field: "a", Op: memory.Lt, Value: true}}})),
		"value of a bad type":  second(db.Query(ctx, "c", memory.Query{Where: []memory.Filter{{Field: "a", Op: memory.Eq, Value: []any{1}}}})),
		"bad order":            second(db.Query(ctx, "c", memory.Query{OrderBy: "x;drop"})),
		"search no collection": second(db.Search(ctx, "", "x", 3)),
	} {
		if !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// testSealedRoundTrip: entries and documents sealed on their way in (as
// an agent with a key seals them) open again on their way out, through
// the backend's own id: a backend must seal an entry's text to the id it
// gives it (memdriver.Stamp or TextFor, with the Append's context), or
// what it stores opens nowhere.
func testSealedRoundTrip(t *testing.T, b memory.Backend) {
	if _, sealed := b.(*memseal.Backend); sealed {
		return // already sealed: the suite's other tests are its round trips
	}
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := memseal.New(b, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"the door code is 4711", "the safe is behind the painting"} {
		if _, err := s.Memory().Append(ctx, memory.Entry{Stream: "sealed", Kind: "note", Text: text}, memory.Retention{}); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	raw, err := b.Memory().Read(ctx, "sealed", memory.ReadOptions{})
	if err != nil || len(raw) != 2 || strings.Contains(texts(raw), "4711") {
		t.Fatalf("the backend keeps %q, %v: want two sealed texts", texts(raw), err)
	}
	again, err := memseal.New(b, key) // another process with the key
	if err != nil {
		t.Fatal(err)
	}
	read, err := again.Memory().Read(ctx, "sealed", memory.ReadOptions{})
	if err != nil || texts(read) != "the door code is 4711,the safe is behind the painting" {
		t.Fatalf("read back sealed: %q, %v", texts(read), err)
	}
	if _, err := s.DB().Write(ctx, memory.Doc{Collection: "sealed", Key: "k", Value: map[string]any{"pin": "4711"}}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	d, err := again.DB().Read(ctx, "sealed", "k")
	if err != nil || d.Value["pin"] != "4711" {
		t.Fatalf("a sealed document read back: %+v, %v", d, err)
	}
}
