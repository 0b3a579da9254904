package spec

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestA2ConfigLoadsAsIs(t *testing.T) {
	s, path, err := Dir{Path: "testdata/agents"}.Load("A2@v1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != ModeChooser || s.AgentName != "A2" || len(s.Enums) != 5 || s.Defaults["tone"] != "direct" || *s.Temperature != 0 || s.MaxOutputTokens != 256 {
		t.Errorf("loaded %+v from %s", s, path)
	}
}

func TestSpecErrors(t *testing.T) {
	const ok = `"agent_name": "a", "version": "v1", "model_name": "gpt-4.1-mini"`
	tests := []struct {
		name, body string
		want       []string
	}{
		{"unknown field", `{` + ok + `, "sytem_text": "x"}`, []string{`unknown field "sytem_text"`, `did you mean "system_text"`}},
		{"unknown nested field", `{` + ok + `, "limits": {"max_turn": 3}}`, []string{`unknown field "limits.max_turn"`, `"max_turns"`}},
		{"unknown retry field", `{` + ok + `, "retry": {"attempt": 3}}`, []string{`"retry.attempt"`}},
		{"unknown fallback field", `{` + ok + `, "fallback_models": [{"model": "x"}]}`, []string{`"fallback_models[0].model"`}},
		{"missing names", `{"model_name": "m"}`, []string{"agent_name is required", "version is required"}},
		{"bad name", `{"agent_name": "a b", "version": "v/1", "model_name": "m"}`, []string{`agent_name "a b"`, `version "v/1"`}},
		{"bad mode", `{` + ok + `, "mode": "Wizard"}`, []string{`mode "wizard" is not one of`}},
		{"bad limits", `{` + ok + `, "limits": {"max_turns": -1, "max_cost_usd": -2, "tool_timeouts_ms": {"x": 0}}}`,
			[]string{"limits.max_turns -1 is negative", "limits.max_cost_usd -2 is negative", "limits.tool_timeouts_ms.x 0 must be positive"}},
		{"bad retry", `{` + ok + `, "retry": {"initial_backoff_ms": 500, "max_backoff_ms": 100}}`, []string{"exceeds max_backoff_ms"}},
		{"bad temperature", `{` + ok + `, "temperature": 3}`, []string{"temperature 3 is outside 0..2"}},
		{"wrong type", `{` + ok + `, "limits": {"max_turns": "ten"}}`, []string{`"limits.max_turns"`, "expected an integer"}},
		{"syntax", "{\n" + ok + ",\n  \"tools\": [}", []string{"line 3"}},
		{"bad mcp servers", `{` + ok + `, "mcp_servers": [{"name": "fs", "command": "x", "url": "http://h"}, {"name": "fs", "url": "ftp://h", "headers": {"A": "${env:}"}},
			{"name": "w", "url": "http://h", "transport": "pigeon"}], "tools": ["mcp:nope/x", "mcp:fs/a*b"]}`,
			[]string{`mcp_servers[0] "fs": give a command or a url, not both`, `mcp_servers[1]: name "fs" is taken`, `url "ftp://h" is not an http or https URL`,
				`headers.A: ${env:}: not a variable name`, `transport "pigeon"`, `tools[0] "mcp:nope/x": no MCP server "nope"`, `tools[1] "mcp:fs/a*b": a tool name or *`}},
		{"bad a2a agents", `{` + ok + `, "a2a_agents": [{"url": "ftp://h"}, {"url": "http://h/a", "headers": {"K": "${env:"}}, {"url": "http://h/a"}],
			"tools": ["a2a:mailto:x"]}`,
			[]string{`a2a_agents[0]: url: "ftp://h"`, `a2a_agents[1]: headers.K: ${env: without its closing }`, `a2a_agents[2]: url "http://h/a" is given twice`, `tools[0] "a2a:mailto:x"`}},
		{"enum mismatch", `{` + ok + `, "output_schema": {"type": "object", "properties": {"tone": {"type": "string", "enum": ["a", "b"]}}},
			"enums": {"tone": ["a", "c"]}}`, []string{"enums.tone [a c] does not match output_schema.properties.tone.enum [a b]"}},
		{"enum without property", `{` + ok + `, "output_schema": {"type": "object", "properties": {}}, "enums": {"tone": ["a"]}}`,
			[]string{`enums.tone: output_schema has no property "tone"`}},
		{"schema enum missing from enums", `{` + ok + `, "output_schema": {"type": "object", "properties": {"a": {"enum": ["x"]}, "b": {"enum": ["y"]}}},
			"enums": {"a": ["x"]}}`, []string{"output_schema.properties.b has an enum that enums does not list"}},
		{"default without property", `{` + ok + `, "output_schema": {"type": "object", "properties": {"a": {}}}, "defaults": {"z": 1}}`,
			[]string{`defaults.z: output_schema has no property "z"`}},
		{"bad output schema", `{` + ok + `, "output_schema": {"type": 12}}`, []string{"output_schema:"}},
		{"duplicate tool", `{` + ok + `, "tools": ["add", "add"]}`, []string{`tools[1] "add" is listed twice`}},
		{"bad tool name", `{` + ok + `, "tools": ["no spaces"]}`, []string{`tools[0] "no spaces" is not a valid tool name`}},
		{"duplicate input key", `{` + ok + `, "input_keys": ["a", "a"]}`, []string{`input_keys[1] "a" is listed twice`}},
		{"policy unknown field", `{` + ok + `, "policy": {"deny": ["x"]}}`, []string{`"policy.deny"`}},
		{"policy bad glob", `{` + ok + `, "policy": {"tools": {"deny": ["sh[ell"]}}}`, []string{`policy.tools.deny[0] "sh[ell"`}},
		{"prompt_ref bad", `{` + ok + `, "prompt_ref": "greet@../x"}`, []string{`prompt_ref "greet@../x": want id or id@version`}},
		{"prompt_ref and system_text", `{` + ok + `, "prompt_ref": "greet@1", "system_text": "s"}`, []string{"prompt_ref and system_text both give the system prompt"}},
		{"memory without stream", `{` + ok + `, "memory": {"load_last": 5}}`, []string{"memory.stream is required"}},
		{"memory bad write", `{` + ok + `, "memory": {"stream": "s", "write": ["everything"]}}`, []string{`memory.write[0] "everything": want one of final_answer, input, tool_results`}},
		{"memory bad ttl", `{` + ok + `, "memory": {"stream": "s", "ttl": "soon"}}`, []string{`memory.ttl "soon"`}},
		{"memory too much", `{` + ok + `, "memory": {"stream": "s", "load_last": 5000}}`, []string{"memory.load_last 5000 is outside 0..1000"}},
		{"memory unknown field", `{` + ok + `, "memory": {"stream": "s", "load": 5}}`, []string{`"memory.load"`}},
		{"writer without schema", `{` + ok + `, "mode": "writer"}`, []string{"mode writer needs an output_schema"}},
		{"Agent Stack fields without mode", `{` + ok + `, "purpose_text": "Pick.", "enums": {"a": ["x"]}, "output_schema": {"type": "object", "properties": {"a": {"enum": ["x"]}}}}`,
			[]string{"mode is required with purpose_text and enums", "chooser, writer or extractor"}},
		{"extractor without its texts", `{` + ok + `, "mode": "extractor", "output_schema": {"type": "object"}}`,
			[]string{"mode extractor needs system_text (or a prompt_ref)", "mode extractor needs purpose_text"}},
		{"default outside its enum", `{` + ok + `, "mode": "chooser", "system_text": "s", "purpose_text": "p",
			"output_schema": {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}}, "defaults": {"a": "z"}}`,
			[]string{"defaults.a z is not one of its enum [x y]"}},
		{"repeated enum choice", `{` + ok + `, "mode": "chooser", "system_text": "s", "purpose_text": "p",
			"output_schema": {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}}, "enums": {"a": ["x", "x"]}}`,
			[]string{"enums.a [x x] does not match"}},
		{"chooser without enums", `{` + ok + `, "mode": "chooser", "output_schema": {"type": "object", "properties": {"a": {"type": "string"}}}}`,
			[]string{"mode chooser needs enums"}},
		{"extractor with tools", `{` + ok + `, "mode": "extractor", "output_schema": {"type": "object"}, "tools": ["x"]}`, []string{"uses no tools"}},
		{"template outside react", `{` + ok + `, "react_template": "v1"}`, []string{"react_template is only used in mode react"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("spec.json", []byte(tt.body))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "spec.json: ") {
				t.Errorf("err %q does not name the file or match ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestEnumsAreSets: enums and the schema's enum list the same choices in
// another order, and a default among them: the spec loads.
func TestEnumsAreSets(t *testing.T) {
	mustSpec(t, `{"agent_name": "a", "version": "v1", "model_name": "m", "mode": "chooser", "system_text": "s", "purpose_text": "p",
		"output_schema": {"type": "object", "properties": {"a": {"enum": ["x", "y"]}}}, "enums": {"a": ["y", "x"]}, "defaults": {"a": "y"}}`)
}

func TestModeIsCaseInsensitive(t *testing.T) {
	for _, m := range []string{"Chooser", "CHOOSER", "chooser"} {
		s := mustSpec(t, `{"agent_name": "a", "version": "v1", "model_name": "m", "mode": "`+m+`",
			"system_text": "Choose.", "purpose_text": "Pick x.", "output_schema": {"type": "object", "properties": {"x": {"enum": ["a"]}}}}`)
		if s.Mode != ModeChooser {
			t.Errorf("%s -> %s", m, s.Mode)
		}
	}
	s := mustSpec(t, `{"agent_name": "a", "version": "v1", "mode": "service"}`)
	if s.ModelName != "" || s.Mode != ModeService {
		t.Errorf("service mode needs no model: %+v", s)
	}
}

func TestDirVersions(t *testing.T) {
	d := Dir{Path: "testdata/agents"}
	vs, err := d.Versions("helper")
	if err != nil || !slices.Equal(vs, []string{"v2", "v10"}) {
		t.Fatalf("versions %v, %v", vs, err)
	}
	s, _, err := d.Load("helper")
	if err != nil || s.Version != "v10" {
		t.Errorf("latest = %v, %v", s, err)
	}
	if _, _, err := d.Load("helper@v3"); !errors.Is(err, ErrUnknownAgent) || !strings.Contains(err.Error(), "v2, v10") {
		t.Errorf("missing version: %v", err)
	}
	if _, _, err := d.Load("nobody"); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("missing agent: %v", err)
	}
	if _, _, err := d.Load("wrong@v1"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `agent_name "right"`) {
		t.Errorf("mismatched file: %v", err)
	}
	if _, _, err := d.Load("../etc@v1"); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("path traversal: %v", err)
	}
}

func TestCompareVersions(t *testing.T) {
	ordered := []string{"0.9", "1.2.0", "1.10.0", "v1", "v2", "v10", "v10a"}
	for i := range ordered {
		for j := range ordered {
			c := CompareVersions(ordered[i], ordered[j])
			if (i < j && c >= 0) || (i > j && c <= 0) || (i == j && c != 0) {
				t.Errorf("CompareVersions(%q, %q) = %d", ordered[i], ordered[j], c)
			}
		}
	}
}

func mustSpec(t testing.TB, js string) *Spec {
	t.Helper()
	s, err := Parse("test", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestIssueSeverities: a spec that does not read is critical; one that
// reads, an unknown field's included, has errors, all of them at once,
// and comes back as read.
func TestIssueSeverities(t *testing.T) {
	s, err := Parse("x", []byte(`{"agent_name": "a", "version": "v1", "sytem_text": "x"`))
	var se *Error
	if !errors.As(err, &se) || se.Issues()[0].Severity != SeverityCritical || s != nil {
		t.Errorf("an unreadable spec: %v", err)
	}
	s, err = Parse("x", []byte(`{"agent_name": "a", "version": "v1", "sytem_text": "x", "mode": "chooser"}`))
	if !errors.As(err, &se) || len(se.Problems) != 5 || se.Issues()[0].Severity != SeverityError || s == nil || s.AgentName != "a" {
		t.Errorf("an unknown field and a check: %v", err)
	}
	_, err = Parse("x", []byte(`{"agent_name": "a b", "version": "v1"}`))
	if !errors.As(err, &se) || se.Issues()[0].Severity != SeverityError {
		t.Errorf("an invalid spec: %v", err)
	}
}

// TestRetryDefaults: what a spec leaves out of retry comes from
// DefaultRetryBudgets, and what it gives replaces it.
func TestRetryDefaults(t *testing.T) {
	n := func(v int) *int { return &v }
	def := DefaultRetryBudgets()
	with := func(f func(*RetryBudgets)) RetryBudgets { b := DefaultRetryBudgets(); f(&b); return b }
	tests := []struct {
		name string
		r    Retry
		want RetryBudgets
	}{
		{"nothing given", Retry{}, def},
		{"no retry", Retry{MaxRetries: n(0)}, with(func(b *RetryBudgets) { b.Attempts = 1 })},
		{"attempts, the older spelling", Retry{Attempts: n(3)}, with(func(b *RetryBudgets) { b.Attempts = 3 })},
		{"tool retries", Retry{ToolMaxRetries: n(2)}, with(func(b *RetryBudgets) { b.ToolAttempts = 3 })},
		{"no correction", Retry{OutputAttempts: n(0)}, with(func(b *RetryBudgets) { b.OutputAttempts = 0 })},
		{"a long first wait lifts the cap", Retry{InitialBackoffMS: 30_000}, with(func(b *RetryBudgets) { b.InitialBackoffMS, b.MaxBackoffMS = 30_000, 30_000 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.r.WithDefaults()
			if got.Attempts != tt.want.Attempts || got.ToolAttempts != tt.want.ToolAttempts || got.OutputAttempts != tt.want.OutputAttempts ||
				got.InitialBackoffMS != tt.want.InitialBackoffMS || got.MaxBackoffMS != tt.want.MaxBackoffMS {
				t.Errorf("WithDefaults = %+v, want %+v", got, tt.want)
			}
		})
	}
	if def.Attempts != 4 || def.ToolAttempts != 1 || def.OutputAttempts != 2 {
		t.Errorf("defaults %+v: 3 model retries, no tool retry, 2 corrections", def)
	}
}
