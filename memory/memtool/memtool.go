// Package memtool is the memory and database tools an agent's model
// calls: memory_append, memory_read and memory_search over the run's
// stream, and db_write, db_read, db_query and db_search over the
// collections the run may reach. The tools read their scope (backend,
// stream, collections, who writes, what filters the writes) from the
// call's context, as the HTTP tools read the network rules: one set of
// tools serves every run.
package memtool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/tool"
)

// Scope is what the memory tools of one run reach, and how they write.
type Scope struct {
	Backend memory.Backend
	// Stream is the run's stream; Collections the only collections the
	// database tools reach (none given: none).
	Stream      string
	Collections []string
	// Keep is the stream's retention, stated with each append.
	Keep memory.Retention
	// Who writes, kept with each entry and document.
	RunID, Agent, UserID string
	// Filter, when not nil, passes every write: it returns the text to
	// write (a document's value as JSON when isJSON), or an error that
	// refuses the write (a blocked write: a policy_violation for the
	// model). target is memory:STREAM or db:COLLECTION/KEY.
	Filter func(ctx context.Context, target, text string, isJSON bool) (string, error)
	// Appended and Wrote, when not nil, are told of each entry appended
	// and each document written.
	Appended func(memory.Entry)
	Wrote    func(memory.Doc)
}

type scopeKey struct{}

// WithScope returns ctx carrying s, for the tools called with it.
func WithScope(ctx context.Context, s *Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// scopeOf returns the scope of the call, or an error saying there is
// none.
func scopeOf(ctx context.Context) (*Scope, error) {
	if s, _ := ctx.Value(scopeKey{}).(*Scope); s != nil && s.Backend != nil {
		return s, nil
	}
	return nil, errors.New("the memory tools work inside an agent's run with memory")
}

// The tools' names: memoryNames are the ones memory.tools adds.
var (
	memoryNames = []string{"memory_append", "memory_read", "memory_search"}
	dbNames     = []string{"db_write", "db_read", "db_query", "db_search"}
)

// MemoryNames returns the names of the memory tools, the ones a spec's
// memory.tools adds.
func MemoryNames() []string { return slices.Clone(memoryNames) }

// Is reports whether name is one of this package's tools.
func Is(name string) bool {
	return slices.Contains(memoryNames, name) || slices.Contains(dbNames, name)
}

// Tools returns the memory and database tools, by name.
func Tools() map[string]tool.Tool {
	ts := []tool.Tool{
		tool.Must(tool.Func("memory_append", "Remember something for later runs: append it to your memory.", memAppend,
			tool.WithIdempotency(tool.NonIdempotent))),
		tool.Must(tool.Func("memory_read", "Read your memory's latest entries.", memRead, tool.WithIdempotency(tool.Safe))),
		tool.Must(tool.Func("memory_search", "Search your memory for entries about something.", memSearch, tool.WithIdempotency(tool.Safe))),
		tool.Must(tool.Func("db_write", "Store a JSON object under a key in a collection, replacing what was there.", dbWrite,
			tool.WithIdempotency(tool.Idempotent))),
		tool.Must(tool.Func("db_read", "Read the object stored under a key in a collection.", dbRead, tool.WithIdempotency(tool.Safe))),
		tool.Must(tool.Func("db_query", "Find the objects of a collection whose fields match filters.", dbQuery, tool.WithIdempotency(tool.Safe))),
		tool.Must(tool.Func("db_search", "Search a collection's objects for words.", dbSearch, tool.WithIdempotency(tool.Safe))),
	}
	out := make(map[string]tool.Tool, len(ts))
	for _, t := range ts {
		out[t.Info().Name] = t
	}
	return out
}

// Append filters text and appends it to the scope's stream as kind: what
// memory_append does, and what a host writes at the end of a run.
func (s *Scope) Append(ctx context.Context, kind, text string) (memory.Entry, error) {
	text, err := s.filter(ctx, "memory:"+s.Stream, text, false)
	if err != nil {
		return memory.Entry{}, err
	}
	return s.AppendFiltered(ctx, kind, text)
}

// AppendFiltered appends text, filtered already, to the scope's stream.
func (s *Scope) AppendFiltered(ctx context.Context, kind, text string) (memory.Entry, error) {
	e, err := s.Backend.Memory().Append(ctx, memory.Entry{Stream: s.Stream, Kind: kind, Text: text,
		RunID: s.RunID, Agent: s.Agent, UserID: s.UserID}, s.Keep)
	if err == nil && s.Appended != nil {
		s.Appended(e)
	}
	return e, err
}

func (s *Scope) filter(ctx context.Context, target, text string, isJSON bool) (string, error) {
	if s.Filter == nil {
		return text, nil
	}
	return s.Filter(ctx, target, text, isJSON)
}

// collection refuses a collection the scope does not reach.
func (s *Scope) collection(name string) error {
	if slices.Contains(s.Collections, name) {
		return nil
	}
	if len(s.Collections) == 0 {
		return tool.NewErrorDetails("policy_violation", fmt.Sprintf("the collection %q is not this agent's: its spec names none (memory.collections)", name), true)
	}
	return tool.NewErrorDetails("policy_violation", fmt.Sprintf("the collection %q is not among this agent's (memory.collections: %v)", name, s.Collections), true)
}

// failed turns a backend's error into the tool error the model sees.
func failed(err error) error {
	var d *tool.ErrorDetails
	switch {
	case errors.As(err, &d):
		return err
	case errors.Is(err, memory.ErrInvalid):
		return tool.NewErrorDetails("invalid_arguments", err.Error(), true)
	case errors.Is(err, memory.ErrNotFound):
		return tool.NewErrorDetails("not_found", err.Error(), true)
	}
	return tool.NewErrorDetails("memory_error", err.Error(), false)
}

type appendArgs struct {
	Text string `json:"text" jsonschema:"What to remember."`
	Kind string `json:"kind,omitempty" jsonschema:"What it is (note, fact, preference…); default note."`
}

func memAppend(ctx context.Context, in appendArgs) (map[string]any, error) {
	s, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.Append(ctx, cmp.Or(in.Kind, "note"), in.Text)
	if err != nil {
		return nil, failed(err)
	}
	return map[string]any{"id": e.ID, "stream": e.Stream}, nil
}

// entryView is what the model sees of an entry.
type entryView struct {
	Time  string  `json:"time"`
	Kind  string  `json:"kind,omitempty"`
	Text  string  `json:"text"`
	Score float64 `json:"score,omitempty"`
}

func view(e memory.Entry, score float64) entryView {
	return entryView{Time: e.Time.Format("2006-01-02T15:04:05Z07:00"), Kind: e.Kind, Text: e.Text, Score: score}
}

type readArgs struct {
	Limit  int  `json:"limit,omitempty" jsonschema:"How many entries (default 20)."`
	Oldest bool `json:"oldest,omitempty" jsonschema:"Oldest first instead of newest first."`
}

func memRead(ctx context.Context, in readArgs) ([]entryView, error) {
	s, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	o := memory.ReadOptions{Limit: min(max(in.Limit, 0), 200), Order: memory.Newest}
	if o.Limit == 0 {
		o.Limit = 20
	}
	if in.Oldest {
		o.Order = memory.Oldest
	}
	entries, err := s.Backend.Memory().Read(ctx, s.Stream, o)
	if err != nil {
		return nil, failed(err)
	}
	out := []entryView{}
	for _, e := range entries {
		out = append(out, view(e, 0))
	}
	return out, nil
}

type searchArgs struct {
	Query string `json:"query" jsonschema:"The words to look for."`
	Limit int    `json:"limit,omitempty" jsonschema:"How many hits (default 5)."`
}

func memSearch(ctx context.Context, in searchArgs) ([]entryView, error) {
	s, err := scopeOf(ctx)
	if err != nil {
		return nil, err
	}
	hits, err := s.Backend.Memory().Search(ctx, in.Query, memory.SearchOptions{Stream: s.Stream, Limit: min(max(in.Limit, 0), 50)})
	if err != nil {
		return nil, failed(err)
	}
	out := []entryView{}
	for _, h := range hits {
		out = append(out, view(h.Entry, h.Score))
	}
	return out, nil
}
