package memorytest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/memory"
)

// cities is a collection whose queries and searches have known answers.
var cities = []memory.Doc{
	{Key: "lisbon", Value: map[string]any{"name": "Lisbon", "country": "Portugal", "population": 545000, "capital": true,
		"about": "capital of Portugal, hills, trams and custard tarts", "climate": map[string]any{"summer": "hot"}}},
	{Key: "porto", Value: map[string]any{"name": "Porto", "country": "Portugal", "population": 232000, "capital": false,
		"about": "port wine cellars along the Douro river", "climate": map[string]any{"summer": "warm"}}},
	{Key: "madrid", Value: map[string]any{"name": "Madrid", "country": "Spain", "population": 3300000, "capital": true,
		"about": "capital of Spain, museums and late dinners", "climate": map[string]any{"summer": "hot"}}},
	{Key: "paris", Value: map[string]any{"name": "Paris", "country": "France", "population": 2100000, "capital": true,
		"about": "museums, the Seine river and cafés", "climate": map[string]any{"summer": "mild"}}},
	{Key: "odd", Value: map[string]any{"name": 7, "population": "many", "about": "a city with odd types"}},
}

func writeCities(t *testing.T, db memory.DB) {
	t.Helper()
	for _, d := range cities {
		d.Collection, d.RunID, d.Agent, d.UserID = "cities", "run_1", "a", "ada"
		if _, err := db.Write(context.Background(), d); err != nil {
			t.Fatalf("Write(%s): %v", d.Key, err)
		}
	}
}

func keys(docs []memory.Doc) string { return join(docs, func(d memory.Doc) string { return d.Key }) }

func testWriteAndRead(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	db := b.DB()
	before := time.Now().Add(-time.Second)
	value := map[string]any{"n": 1.5, "s": "x", "b": true, "list": []any{1.0, "two"}, "nested": map[string]any{"k": nil}}
	w, err := db.Write(ctx, memory.Doc{Collection: "c", Key: "k", Value: value, RunID: "run_1", Agent: "a", UserID: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if w.Time.Before(before) {
		t.Errorf("written at %v", w.Time)
	}
	got, err := db.Read(ctx, "c", "k")
	if err != nil || !reflect.DeepEqual(got.Value, value) || got.RunID != "run_1" || got.Agent != "a" || got.UserID != "ada" ||
		got.Collection != "c" || got.Key != "k" || !got.Time.Equal(w.Time) {
		t.Fatalf("Read = %+v, %v", got, err)
	}
	got.Value["n"] = 99.0 // the caller's copy
	if again, _ := db.Read(ctx, "c", "k"); again.Value["n"] != 1.5 {
		t.Error("changing a value read changed the stored one")
	}
	if _, err := db.Write(ctx, memory.Doc{Collection: "c", Key: "k", Value: map[string]any{"n": 2}, RunID: "run_2"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Read(ctx, "c", "k"); got.Value["n"] != 2.0 || got.RunID != "run_2" || len(got.Value) != 1 {
		t.Errorf("after an overwrite: %+v", got)
	}
	if _, err := db.Read(ctx, "c", "nope"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("Read of a missing key: %v", err)
	}
	if _, err := db.Read(ctx, "other", "k"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("Read in another collection: %v", err)
	}
}

func testQuery(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	db := b.DB()
	writeCities(t, db)
	f := func(field string, op memory.Op, v any) memory.Filter {
		return memory.Filter{Field: field, Op: op, Value: v}
	}
	for _, tc := range []struct {
		name string
		q    memory.Query
		want string
	}{
		{"all, by key", memory.Query{}, "lisbon,madrid,odd,paris,porto"},
		{"equal string", memory.Query{Where: []memory.Filter{f("country", memory.Eq, "Portugal")}}, "lisbon,porto"},
		{"not equal", memory.Query{Where: []memory.Filter{f("country", memory.Ne, "Portugal")}}, "madrid,paris"},
		{"equal bool", memory.Query{Where: []memory.Filter{f("capital", memory.Eq, true)}}, "lisbon,madrid,paris"},
		{"number range", memory.Query{Where: []memory.Filter{f("population", memory.Gt, 1000000)}}, "madrid,paris"},
		{"between", memory.Query{Where: []memory.Filter{f("population", memory.Gte, 232000), f("population", memory.Lt, 2100000)}}, "lisbon,porto"},
		{"string range", memory.Query{Where: []memory.Filter{f("name", memory.Gte, "M")}}, "madrid,paris,porto"},
		{"dotted path", memory.Query{Where: []memory.Filter{f("climate.summer", memory.Eq, "hot")}}, "lisbon,madrid"},
		{"types apart", memory.Query{Where: []memory.Filter{f("population", memory.Eq, "545000")}}, ""},
		{"missing field", memory.Query{Where: []memory.Filter{f("mayor", memory.Eq, "x")}}, ""},
		{"order by number", memory.Query{Where: []memory.Filter{f("capital", memory.Eq, true)}, OrderBy: "population"}, "lisbon,paris,madrid"},
		{"order desc, limit", memory.Query{Where: []memory.Filter{f("population", memory.Gt, 0)}, OrderBy: "population", Desc: true, Limit: 2}, "madrid,paris"},
		{"order by string", memory.Query{Where: []memory.Filter{f("country", memory.Ne, "x")}, OrderBy: "name"}, "lisbon,madrid,paris,porto"},
	} {
		got, err := db.Query(ctx, "cities", tc.q)
		if err != nil || keys(got) != tc.want {
			t.Errorf("%s: Query = %q, %v; want %q", tc.name, keys(got), err, tc.want)
		}
	}
	if got, _ := db.Query(ctx, "cities", memory.Query{Where: []memory.Filter{f("name", memory.Eq, "Lisbon")}}); len(got) != 1 ||
		got[0].Value["population"] != 545000.0 || got[0].UserID != "ada" {
		t.Errorf("a queried document: %+v", got)
	}
	if got, err := db.Query(ctx, "nowhere", memory.Query{}); err != nil || len(got) != 0 {
		t.Errorf("an empty collection: %v, %v", got, err)
	}
}

func testSearchDocs(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	db := b.DB()
	writeCities(t, db)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"wine by the river", []string{"porto", "paris"}},
		{"trams and tarts", []string{"lisbon"}},
		{"museums", nil}, // madrid and paris, either first
		{"volcanoes", nil},
	} {
		hits, err := db.Search(ctx, "cities", tc.text, 5)
		if err != nil {
			t.Fatalf("Search(%q): %v", tc.text, err)
		}
		var got []string
		for _, h := range hits {
			got = append(got, h.Key)
		}
		switch tc.text {
		case "museums":
			slices.Sort(got)
			if !slices.Equal(got, []string{"madrid", "paris"}) {
				t.Errorf("Search(museums) = %q", got)
			}
		default:
			if !slices.Equal(got, tc.want) {
				t.Errorf("Search(%q) = %q, want %q", tc.text, got, tc.want)
			}
		}
	}
	if hits, _ := db.Search(ctx, "cities", "capital", 1); len(hits) != 1 {
		t.Errorf("top 1 gave %d hits", len(hits))
	}
}

func testConcurrentWrites(t *testing.T, b memory.Backend) {
	ctx := context.Background()
	db := b.DB()
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers*10)
	for w := range writers {
		wg.Go(func() {
			for i := range 10 {
				if _, err := db.Write(ctx, memory.Doc{Collection: "c", Key: fmt.Sprintf("k%d", w), Value: map[string]any{"i": i}}); err != nil {
					errs <- err
				}
				if _, err := db.Write(ctx, memory.Doc{Collection: "c", Key: "shared", Value: map[string]any{"w": w}}); err != nil {
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
	all, err := db.Query(ctx, "c", memory.Query{})
	if err != nil || len(all) != writers+1 {
		t.Fatalf("%d documents, want %d (%v)", len(all), writers+1, err)
	}
	for _, d := range all {
		if d.Key != "shared" && d.Value["i"] != 9.0 {
			t.Errorf("%s holds %v, want its last write", d.Key, d.Value)
		}
	}
}
