package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// probeOpened counts the openings of the test connector "probe": a
// refused spec must not open it.
var probeOpened atomic.Int32

func init() {
	tool.RegisterConnector("probe", func(json.RawMessage, string) ([]tool.Tool, func() error, error) {
		probeOpened.Add(1)
		return []tool.Tool{tool.Must(tool.Func("probe_run", "Runs a probe.", func(context.Context, struct{}) (string, error) { return "ran", nil }))}, nil, nil
	})
}

// creationRules let a builder make agents with the clock and the
// sub-agents of the directory, and nothing else: every connector,
// server and other tool is an admin's.
var creationRules = policy.Creation{
	"*":          {"admin"},
	"agent:*":    {"builder", "admin"},
	"tool:clock": {"builder", "admin"},
	"tool:one":   {"builder", "admin"},
}

var (
	builder = &policy.Principal{UserID: "ann", Roles: []string{"builder"}}
	admin   = &policy.Principal{UserID: "root", Roles: []string{"admin"}}
)

// TestCreatedBy attacks the creation rules the way a caller who brings
// a spec would: each thing the spec would bring into being that the
// caller may not create is refused by name, before any of it is opened,
// with ErrPolicyViolation; a sub-agent's own connectors too; an admin
// builds the same spec.
func TestCreatedBy(t *testing.T) {
	dir := t.TempDir()
	const head = `"version": "v1", "model_name": "m", "system_text": "s"`
	const sub = `"version": "v1", "model_name": "scripted:none.json", "system_text": "s"`
	for name, body := range map[string]string{
		"helper/v1.json":   `{"agent_name": "helper", ` + sub + `, "tools": ["clock"]}`,
		"helper/none.json": `{"turns": [{"content": "done"}]}`,
		"sneaky/v1.json":   `{"agent_name": "sneaky", ` + sub + `, "tools": ["probe_run"], "connectors": {"probe": {}}}`,
		"sneaky/none.json": `{"turns": [{"content": "done"}]}`,
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clock := tool.Must(tool.Func("clock", "The time.", func(context.Context, struct{}) (string, error) { return "noon", nil }))
	rm := tool.Must(tool.Func("rm", "Removes a file.", func(context.Context, struct{ Path string }) (string, error) { return "gone", nil }))
	for _, tc := range []struct {
		name string
		p    *policy.Principal
		spec string
		want []string // each refusal; none: it builds
	}{
		{"a builder's own agent", builder, `"tools": ["clock", "agent:helper"]`, nil},
		{"a connector", builder, `"tools": ["probe_run"], "connectors": {"probe": {}}`,
			[]string{`user ann (roles: builder) may not create connector:probe: "*" is for the roles admin`, "tool:probe_run"}},
		{"a server it would start", builder, `"tools": ["mcp:fs/read"], "mcp_servers": [{"name": "fs", "command": "sh", "args": ["-c", "touch pwned"]}]`,
			[]string{"may not create mcp:sh -c touch pwned"}},
		{"a memory backend of its own", builder, `"memory": {"backend": "pwned", "stream": "s"}`, []string{"may not create memory:pwned"}},
		{"a remote agent", builder, `"tools": ["a2a:https://agents.example.com/crm"]`, []string{"may not create a2a:agents.example.com"}},
		{"a registry's tool", builder, `"tools": ["clock", "rm"]`, []string{"may not create tool:rm"}},
		{"a sub-agent's connector", builder, `"tools": ["agent:sneaky"]`,
			[]string{`tools[0] "agent:sneaky": sneaky@v1: user ann (roles: builder) may not create connector:probe`}},
		{"no principal", nil, `"tools": ["clock"]`, []string{"a caller without roles may not create agent:top"}},
		{"an admin", admin, `"tools": ["probe_run", "rm", "agent:sneaky"], "connectors": {"probe": {}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := probeOpened.Load()
			t.Chdir(t.TempDir())
			reg, err := tool.NewRegistry(clock, rm)
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(mustSpec(t, `{"agent_name": "top", `+head+`, `+tc.spec+`}`), WithProvider(&recorder{}, "test"),
				WithTools(reg), WithAgents(spec.Dir{Path: dir}), CreatedBy(tc.p, creationRules))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				a.Close()
				return
			}
			if err == nil {
				a.Close()
				t.Fatal("built")
			}
			if !errors.Is(err, ErrPolicyViolation) || IsConfigError(err) {
				t.Errorf("%v: not a policy violation alone", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant it to say %s", err, w)
				}
			}
			if probeOpened.Load() != before {
				t.Error("a refused spec opened its connector")
			}
			if _, err := os.Stat("pwned"); err == nil {
				t.Error("a refused spec started its MCP server")
			}
		})
	}
}

// TestCreatedByListedTools: the tools a source lists are checked once
// listed, and a tool a source adds later that the creator may not
// create is never offered, nor called when a model names it.
func TestCreatedByListedTools(t *testing.T) {
	one := tool.Must(tool.Func("one", "One.", func(context.Context, struct{}) (string, error) { return "1", nil }))
	var wiped atomic.Bool
	wipe := tool.Must(tool.Func("wipe", "Wipes.", func(context.Context, struct{}) (string, error) { wiped.Store(true); return "wiped", nil }))
	rules := policy.Creation{"tool:wipe": {"admin"}}
	sp := `{"agent_name": "a", "version": "v1", "model_name": "m", "system_text": "Hi.", "tools": ["fake:x"]}`

	set := &fakeSet{}
	set.tools.Store(&[]tool.Tool{one, wipe})
	_, err := New(mustSpec(t, sp), WithProvider(&recorder{}, "test"), WithSource("fake", &fakeSource{set: set}), CreatedBy(builder, rules))
	if !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "may not create tool:wipe") {
		t.Errorf("a listed tool: %v", err)
	}
	if !set.closed.Load() {
		t.Error("the refused agent's set stays open")
	}

	set = &fakeSet{}
	set.tools.Store(&[]tool.Tool{one})
	model := &recorder{replies: []reply{calls(call("c1", "one", `{}`)), calls(call("c2", "wipe", `{}`)), answer("done")}}
	a, err := New(mustSpec(t, sp), WithProvider(model, "test"), WithSource("fake", &fakeSource{set: set}), CreatedBy(builder, rules))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	set.tools.Store(&[]tool.Tool{one, wipe}) // the server adds a tool
	set.changes.Add(1)
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range model.reqs {
		if slices.ContainsFunc(req.Tools, func(ts llm.ToolSpec) bool { return ts.Name == "wipe" }) {
			t.Errorf("call %d offered wipe", i)
		}
	}
	if wiped.Load() || !strings.Contains(res.Steps[1].Observation, `there is no tool \"wipe\"`) {
		t.Errorf("wipe ran or was not refused: %q", res.Steps[1].Observation)
	}
}

// TestLoadRegistryCreatedBy: a directory loaded for a caller holds no
// agent the caller may not create, and the error says so to errors.Is.
func TestLoadRegistryCreatedBy(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "shell"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := `{"agent_name": "shell", "version": "v1", "model_name": "scripted:none.json", "system_text": "s", "tools": ["probe_run"], "connectors": {"probe": {}}}`
	if err := os.WriteFile(filepath.Join(dir, "shell", "v1.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	before := probeOpened.Load()
	_, err := LoadRegistry(spec.Dir{Path: dir}, CreatedBy(builder, creationRules))
	if !errors.Is(err, ErrPolicyViolation) || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "may not create connector:probe") {
		t.Errorf("LoadRegistry: %v", err)
	}
	if probeOpened.Load() != before {
		t.Error("the refused agent's connector was opened")
	}
}
