package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/tool"
)

// The memory tools an agent gets with "memory": {"tools": true}, and the
// database tools it gets by naming them in "tools".
var (
	memoryToolNames = []string{"memory_append", "memory_read", "memory_search"}
	dbToolNames     = []string{"db_write", "db_read", "db_query", "db_search"}
)

type memAppendArgs struct {
	Text string `json:"text" jsonschema:"What to remember."`
	Kind string `json:"kind,omitempty" jsonschema:"What it is (note, fact, preference…); default note."`
}

type memReadArgs struct {
	Limit  int  `json:"limit,omitempty" jsonschema:"How many entries (default 20)."`
	Oldest bool `json:"oldest,omitempty" jsonschema:"Oldest first instead of newest first."`
}

type memSearchArgs struct {
	Query string `json:"query" jsonschema:"The words to look for."`
	Limit int    `json:"limit,omitempty" jsonschema:"How many hits (default 5)."`
}

type dbWriteArgs struct {
	Collection string         `json:"collection"`
	Key        string         `json:"key"`
	Value      map[string]any `json:"value" jsonschema:"A JSON object."`
}

type dbReadArgs struct {
	Collection string `json:"collection"`
	Key        string `json:"key"`
}

type dbQueryArgs struct {
	Collection string          `json:"collection"`
	Where      []memory.Filter `json:"where,omitempty" jsonschema:"Filters, all of which must match: {field, op (= != < <= > >=), value}."`
	OrderBy    string          `json:"order_by,omitempty"`
	Desc       bool            `json:"desc,omitempty"`
	Limit      int             `json:"limit,omitempty"`
}

type dbSearchArgs struct {
	Collection string `json:"collection"`
	Text       string `json:"text"`
	TopK       int    `json:"top_k,omitempty"`
}

// memoryTools returns the memory and database tools of the agent's
// memory, by name.
func (a *Agent) memoryTools() map[string]tool.Tool {
	if a.mem == nil {
		return nil
	}
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
	out := map[string]tool.Tool{}
	for _, t := range ts {
		out[t.Info().Name] = t
	}
	return out
}

// memOf returns the memory of the run ctx belongs to.
func memOf(ctx context.Context) (*run, error) {
	r := runOf(ctx)
	if r == nil || r.mem == nil {
		return nil, errors.New("the memory tools work inside an agent's run with memory")
	}
	return r, nil
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
	return tool.NewErrorDetails(CodeMemoryError, err.Error(), false)
}

func memAppend(ctx context.Context, in memAppendArgs) (map[string]any, error) {
	r, err := memOf(ctx)
	if err != nil {
		return nil, err
	}
	e, err := r.remember(ctx, cmp.Or(in.Kind, "note"), in.Text)
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

func memRead(ctx context.Context, in memReadArgs) ([]entryView, error) {
	r, err := memOf(ctx)
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
	entries, err := r.mem.am.b.Memory().Read(ctx, r.mem.stream, o)
	if err != nil {
		return nil, failed(err)
	}
	out := []entryView{}
	for _, e := range entries {
		out = append(out, view(e, 0))
	}
	return out, nil
}

func memSearch(ctx context.Context, in memSearchArgs) ([]entryView, error) {
	r, err := memOf(ctx)
	if err != nil {
		return nil, err
	}
	hits, err := r.mem.am.b.Memory().Search(ctx, in.Query, memory.SearchOptions{Stream: r.mem.stream, Limit: min(max(in.Limit, 0), 50)})
	if err != nil {
		return nil, failed(err)
	}
	out := []entryView{}
	for _, h := range hits {
		out = append(out, view(h.Entry, h.Score))
	}
	return out, nil
}

// collection checks that the run may reach collection.
func (r *run) collection(name string) error {
	if cs := r.mem.collections; !slices.Contains(cs, name) {
		if len(cs) == 0 {
			return tool.NewErrorDetails(CodePolicyViolation, fmt.Sprintf("the collection %q is not this agent's: its spec names none (memory.collections)", name), true)
		}
		return tool.NewErrorDetails(CodePolicyViolation, fmt.Sprintf("the collection %q is not among this agent's (memory.collections: %v)", name, cs), true)
	}
	return nil
}

func dbWrite(ctx context.Context, in dbWriteArgs) (map[string]any, error) {
	r, err := memOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.collection(in.Collection); err != nil {
		return nil, err
	}
	data, err := json.Marshal(in.Value)
	if err != nil {
		return nil, tool.NewErrorDetails("invalid_arguments", "value: "+err.Error(), true)
	}
	text, err := r.filterWrite(ctx, "db:"+in.Collection+"/"+in.Key, string(data), true)
	if err != nil {
		return nil, failed(err)
	}
	var value map[string]any
	if err := json.Unmarshal([]byte(text), &value); err != nil {
		return nil, tool.NewErrorDetails("invalid_arguments", "value: "+err.Error(), true)
	}
	d, err := r.mem.am.b.DB().Write(ctx, memory.Doc{Collection: in.Collection, Key: in.Key, Value: value,
		RunID: r.st.RunID, Agent: r.a.spec.AgentName, UserID: r.info.UserID})
	if err != nil {
		return nil, failed(err)
	}
	r.mem.note(MemoryDelta{Collection: d.Collection, Key: d.Key})
	return map[string]any{"collection": d.Collection, "key": d.Key}, nil
}

func dbRead(ctx context.Context, in dbReadArgs) (map[string]any, error) {
	r, err := memOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.collection(in.Collection); err != nil {
		return nil, err
	}
	d, err := r.mem.am.b.DB().Read(ctx, in.Collection, in.Key)
	if err != nil {
		return nil, failed(err)
	}
	return d.Value, nil
}

func dbQuery(ctx context.Context, in dbQueryArgs) ([]map[string]any, error) {
	r, err := memOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.collection(in.Collection); err != nil {
		return nil, err
	}
	docs, err := r.mem.am.b.DB().Query(ctx, in.Collection, memory.Query{Where: in.Where, OrderBy: in.OrderBy, Desc: in.Desc, Limit: min(max(in.Limit, 0), 100)})
	if err != nil {
		return nil, failed(err)
	}
	out := []map[string]any{}
	for _, d := range docs {
		out = append(out, map[string]any{"key": d.Key, "value": d.Value})
	}
	return out, nil
}

func dbSearch(ctx context.Context, in dbSearchArgs) ([]map[string]any, error) {
	r, err := memOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.collection(in.Collection); err != nil {
		return nil, err
	}
	hits, err := r.mem.am.b.DB().Search(ctx, in.Collection, in.Text, min(max(in.TopK, 0), 50))
	if err != nil {
		return nil, failed(err)
	}
	out := []map[string]any{}
	for _, h := range hits {
		out = append(out, map[string]any{"key": h.Key, "value": h.Value, "score": h.Score})
	}
	return out, nil
}
