package runlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
)

// TestReadExchange: what a run was told and answered, from its start and
// its last result alone: a message of one text is the text, an input of
// several keys the input; a run with no result yet has no answer; a
// failed one its error; a sealed log opens with its key only.
func TestReadExchange(t *testing.T) {
	ctx := context.Background()
	s, _ := runlog.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	db := teststore.Open(t)
	write := func(id string, input map[string]any, results []any, opts ...journal.Option) {
		t.Helper()
		w, err := journal.Create(ctx, db, store.Run{ID: id, Kind: "agent", Name: "a"}, &runlog.Start{Kind: "agent", RunID: id, Input: input}, nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for i, res := range results {
			if i < len(results)-1 {
				w.Add(journal.Record(store.KindResult, 1, "", res)) // a result a resume superseded
				continue
			}
			if err := w.End(ctx, store.Completed, store.Summary{}, 1, res); err != nil {
				t.Fatal(err)
			}
		}
		if len(results) == 0 {
			if err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("run_text", map[string]any{"message": "Hi."}, []any{map[string]any{"result": "Hello."}})
	write("run_keys", map[string]any{"a": 1.0, "b": "x"}, []any{map[string]any{"result": map[string]any{"sum": 3.0}}})
	write("run_going", map[string]any{"task": "Wait."}, nil)
	write("run_failed", map[string]any{"task": "Fail."}, []any{map[string]any{"result": nil, "error": map[string]any{"message": "it broke"}}})
	write("run_resumed", map[string]any{"task": "Again."}, []any{map[string]any{"result": "First."}, map[string]any{"result": "Last."}})
	write("run_sealed", map[string]any{"task": "Secret."}, []any{map[string]any{"result": "Sealed answer."}}, journal.Sealed(s))
	for _, tc := range []struct {
		id            string
		opts          []runlog.Option
		message, want any
		err           string
	}{
		{id: "run_text", message: "Hi.", want: "Hello."},
		{id: "run_keys", message: map[string]any{"a": 1.0, "b": "x"}, want: map[string]any{"sum": 3.0}},
		{id: "run_going", message: "Wait."},
		{id: "run_failed", message: "Fail.", err: "it broke"},
		{id: "run_resumed", message: "Again.", want: "Last."},
		{id: "run_sealed", opts: []runlog.Option{runlog.Sealed(s)}, message: "Secret.", want: "Sealed answer."},
	} {
		t.Run(tc.id, func(t *testing.T) {
			// A store that reads records by kind, and one that reads the
			// whole log.
			for _, st := range []store.Store{db, struct{ store.Store }{db}} {
				x, err := runlog.ReadExchange(ctx, st, tc.id, tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				if !equalJSON(x.Message, tc.message) || !equalJSON(x.Answer, tc.want) || x.Error != tc.err {
					t.Errorf("%T: got %+v", st, x)
				}
			}
		})
	}
	if _, err := runlog.ReadExchange(ctx, db, "run_sealed"); !errors.Is(err, runlog.ErrSealed) {
		t.Errorf("a sealed log without its key: %v", err)
	}
	if _, err := runlog.ReadExchange(ctx, db, "run_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no such run: %v", err)
	}
}

// equalJSON says whether a and b are the same as JSON values.
func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
