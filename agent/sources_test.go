package agent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/tool"
)

// TestSourceNotLinked: a spec naming tools of a source no linked package
// registered (this test links neither tool/mcp nor tool/a2a) is refused
// with an error naming the import, for each entry, as sql.Open names a
// driver it does not have; a scheme agentry has no source for is called
// a forgotten import, with no package of agentry's named.
func TestSourceNotLinked(t *testing.T) {
	_, err := New(mustSpec(t, `{"agent_name": "a", "version": "v1", "model_name": "m", "system_text": "Hi.",
		"mcp_servers": [{"name": "fs", "command": "mcp-server-filesystem"}],
		"tools": ["mcp:fs/read_text_file", "a2a:https://agents.example.com", "crm:contacts"]}`), WithProvider(&recorder{}, "test"))
	if err != nil && strings.Contains(err.Error(), "agentry/tool/crm") {
		t.Errorf("New named a package agentry does not have: %v", err)
	}
	for _, want := range []string{
		`tools[0] "mcp:fs/read_text_file": no tool source "mcp" is linked: import _ "github.com/agentry/agentry/tool/mcp"`,
		`tools[1] "a2a:https://agents.example.com": no tool source "a2a" is linked: import _ "github.com/agentry/agentry/tool/a2a"`,
		`tools[2] "crm:contacts": no tool source "crm" is registered (a forgotten import?`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to say %s", err, want)
		}
	}
}

// fakeSource is a source of "fake:NAME" entries: one set whose tools
// change when bumped.
type fakeSource struct {
	set *fakeSet
	req tool.SourceRequest
}

func (f *fakeSource) Open(_ context.Context, req tool.SourceRequest) ([]tool.Set, error) {
	f.req = req
	if strings.Contains(strings.Join(req.Entries, ","), "broken") {
		return []tool.Set{f.set}, errors.Join(errors.New("tools[9] \"fake:broken\": it broke"), errors.New("and again"))
	}
	return []tool.Set{f.set}, nil
}

type fakeSet struct {
	changes atomic.Uint64
	tools   atomic.Pointer[[]tool.Tool]
	closed  atomic.Bool
}

func (s *fakeSet) Name() string    { return "fake" }
func (s *fakeSet) Changes() uint64 { return s.changes.Load() }
func (s *fakeSet) Close() error    { s.closed.Store(true); return nil }
func (s *fakeSet) Tools(context.Context) ([]tool.Tool, error) {
	return *s.tools.Load(), nil
}

// TestWithSource: an agent's own source gets the entries of its scheme,
// their places and the spec; its set's tools are offered, and offered
// anew when the set says they changed; each of its errors is a problem;
// Close closes its sets.
func TestWithSource(t *testing.T) {
	one := tool.Must(tool.Func("one", "One.", func(context.Context, struct{}) (string, error) { return "1", nil }))
	two := tool.Must(tool.Func("two", "Two.", func(context.Context, struct{}) (string, error) { return "2", nil }))
	set := &fakeSet{}
	set.tools.Store(&[]tool.Tool{one})
	src := &fakeSource{set: set}
	a, err := New(mustSpec(t, `{"agent_name": "a", "version": "v1", "model_name": "m", "system_text": "Hi.", "tools": ["fake:x", "fake:y"]}`),
		WithProvider(&recorder{}, "test"), WithSource("fake", src))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(src.req.Entries, ","); got != "fake:x,fake:y" || src.req.Index[1] != 1 || !strings.Contains(string(src.req.Spec), `"agent_name":"a"`) {
		t.Errorf("the request: %+v", src.req)
	}
	if names := toolNames(a.table()); names != "one" {
		t.Errorf("tools %q, want one", names)
	}
	set.tools.Store(&[]tool.Tool{one, two})
	set.changes.Add(1)
	if names := toolNames(a.refreshSets(context.Background())); names != "one,two" {
		t.Errorf("after a change: %q, want one,two", names)
	}
	a.Close()
	if !set.closed.Load() {
		t.Error("Close left the set open")
	}
	_, err = New(mustSpec(t, `{"agent_name": "a", "version": "v1", "model_name": "m", "system_text": "Hi.", "tools": ["fake:broken"]}`),
		WithProvider(&recorder{}, "test"), WithSource("fake", &fakeSource{set: set}))
	if err == nil || !strings.Contains(err.Error(), `tools[9] "fake:broken": it broke`) || !strings.Contains(err.Error(), "and again") {
		t.Errorf("a source's errors: %v", err)
	}
}

func toolNames(tt *toolTable) string {
	var names []string
	for _, s := range tt.specs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}
