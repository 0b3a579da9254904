package memtool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/memory/memtool"
	"github.com/agentry/agentry/tool"
)

func call(t *testing.T, ctx context.Context, name, args string) (string, error) {
	t.Helper()
	tl := memtool.Tools()[name]
	if tl == nil {
		t.Fatalf("no tool %s", name)
	}
	out, err := tool.Handle(ctx, &tool.Call{Name: name, Tool: tl, Info: tl.Info(), Arguments: json.RawMessage(args)})
	return string(out.JSON), err
}

func errType(err error) string {
	var d *tool.ErrorDetails
	if errors.As(err, &d) {
		return d.Type
	}
	if err != nil {
		return "error"
	}
	return ""
}

// The tools reach only their run's scope: no scope, no memory; the
// database tools only the collections it names (none named: none); a
// write the scope's filter refuses is not written; what is written is
// told to the scope, with its author.
func TestScope(t *testing.T) {
	b := inmem.New()
	var appended []memory.Entry
	var wrote []memory.Doc
	s := &memtool.Scope{Backend: b, Stream: "user:ada", Collections: []string{"trips:ada"}, RunID: "run_1", Agent: "a", UserID: "ada",
		Filter: func(_ context.Context, target, text string, _ bool) (string, error) {
			if strings.Contains(text, "forbidden") {
				return "", tool.NewErrorDetails("policy_violation", "blocked write to "+target, true)
			}
			return strings.ReplaceAll(text, "secret", "[REDACTED]"), nil
		},
		Appended: func(e memory.Entry) { appended = append(appended, e) },
		Wrote:    func(d memory.Doc) { wrote = append(wrote, d) },
	}
	ctx := memtool.WithScope(context.Background(), s)
	for _, tc := range []struct {
		name, tool, args, want string
		ctx                    context.Context
	}{
		{"no scope", "memory_read", `{}`, "error", context.Background()},
		{"append", "memory_append", `{"text": "likes the secret aisle"}`, "", ctx},
		{"a blocked append", "memory_append", `{"text": "forbidden"}`, "policy_violation", ctx},
		{"read", "memory_read", `{}`, "", ctx},
		{"write to the run's collection", "db_write", `{"collection": "trips:ada", "key": "k", "value": {"city": "Oslo"}}`, "", ctx},
		{"write to another user's collection", "db_write", `{"collection": "trips:bob", "key": "k", "value": {}}`, "policy_violation", ctx},
		{"read another user's collection", "db_read", `{"collection": "trips:bob", "key": "k"}`, "policy_violation", ctx},
		{"query another user's collection", "db_query", `{"collection": "trips:bob"}`, "policy_violation", ctx},
		{"search another user's collection", "db_search", `{"collection": "trips:bob", "text": "x"}`, "policy_violation", ctx},
		{"a missing key", "db_read", `{"collection": "trips:ada", "key": "nope"}`, "not_found", ctx},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := call(t, tc.ctx, tc.tool, tc.args); errType(err) != tc.want {
				t.Errorf("%s: %v; want %q", tc.tool, err, tc.want)
			}
		})
	}
	if len(appended) != 1 || appended[0].Text != "likes the [REDACTED] aisle" || appended[0].UserID != "ada" || appended[0].RunID != "run_1" {
		t.Errorf("appended %+v", appended)
	}
	if len(wrote) != 1 || wrote[0].Collection != "trips:ada" {
		t.Errorf("wrote %+v", wrote)
	}
	if _, err := b.DB().Read(context.Background(), "trips:bob", "k"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("a refused write reached the backend: %v", err)
	}
	none := memtool.WithScope(context.Background(), &memtool.Scope{Backend: b, Stream: "s"})
	if _, err := call(t, none, "db_read", `{"collection": "trips:ada", "key": "k"}`); errType(err) != "policy_violation" ||
		!strings.Contains(err.Error(), "names none") {
		t.Errorf("a scope without collections: %v", err)
	}
}
