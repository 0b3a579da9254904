package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := `{
	  "tools": {"allow": ["kv_*", "http_*"], "deny": ["shell"]},
	  "approval": {"tools": ["http_request"]},
	  "rate_limits": {"http_get": {"per_second": 2, "burst": 2}, "*": {"per_minute": 120}},
	  "content_filters": [
	    {"name": "no-secrets", "match": "secrets", "on": ["tool_input", "memory_write", "output"], "action": "redact"},
	    {"name": "no-drop", "pattern": "(?i)drop\\s+table", "on": ["tool_input"], "action": "block"}
	  ],
	  "network": {"allow_hosts": ["api.example.com"], "allow_private": false}
	}`
	p, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tools.Allow) != 2 || p.RateLimits["http_get"].Burst != 2 || p.ContentFilters[1].Action != Block || p.Network.AllowHosts[0] != "api.example.com" {
		t.Errorf("parsed %+v", p)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", `{"tools": {"alow": ["x"]}}`, `"tools.alow"`},
		{"wrong type", `{"tools": {"allow": "x"}}`, `allow`},
		{"bad glob", `{"tools": {"deny": ["sh[ell"]}}`, `tools.deny[0] "sh[ell"`},
		{"empty glob", `{"approval": {"tools": [""]}}`, `approval.tools[0]: empty pattern`},
		{"negative rate", `{"rate_limits": {"x": {"per_second": -1}}}`, `rate_limits.x: rates and burst must not be negative`},
		{"two rates", `{"rate_limits": {"x": {"per_second": 1, "per_minute": 60}}}`, `not both`},
		{"no rate", `{"rate_limits": {"x": {"burst": 3}}}`, `rate_limits.x: give per_second or per_minute`},
		{"bad regex", `{"content_filters": [{"name": "f", "pattern": "(", "on": ["output"], "action": "block"}]}`, `content_filters[0].pattern`},
		{"unknown matcher", `{"content_filters": [{"name": "f", "match": "passwords", "on": ["output"], "action": "block"}]}`, `content_filters[0].match "passwords"`},
		{"match and pattern", `{"content_filters": [{"name": "f", "match": "pii", "pattern": "x", "on": ["output"], "action": "block"}]}`, `not both`},
		{"no target", `{"content_filters": [{"name": "f", "match": "pii", "action": "block"}]}`, `content_filters[0].on`},
		{"bad target", `{"content_filters": [{"name": "f", "match": "pii", "on": ["logs"], "action": "block"}]}`, `content_filters[0].on[0] "logs"`},
		{"bad action", `{"content_filters": [{"name": "f", "match": "pii", "on": ["output"], "action": "warn"}]}`, `content_filters[0].action "warn"`},
		{"no name", `{"content_filters": [{"match": "pii", "on": ["output"], "action": "block"}]}`, `content_filters[0].name: required`},
		{"same name", `{"content_filters": [{"name": "f", "match": "pii", "on": ["output"], "action": "block"}, {"name": "f", "match": "secrets", "on": ["output"], "action": "redact"}]}`, `content_filters[1].name "f": used twice`},
		{"bad host glob", `{"network": {"allow_hosts": ["[a"]}}`, `network.allow_hosts[0]`},
		{"not JSON", `{"tools": ]}`, `invalid JSON`},
		{"cut short", `{"tools":`, `unexpected EOF`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var pe *Error
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want a *policy.Error saying %s", err, tc.want)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		globs []string
		name  string
		want  bool
	}{
		{[]string{"kv_*"}, "kv_get", true},
		{[]string{"kv_*"}, "http_get", false},
		{[]string{"*"}, "shell", true},
		{[]string{"http_get", "shell"}, "shell", true},
		{nil, "shell", false},
		{[]string{"*.example.com"}, "api.example.com", true},
		{[]string{"*.example.com"}, "example.com", false},
	} {
		if got := Matches(tc.globs, tc.name); got != tc.want {
			t.Errorf("Matches(%v, %q) = %v, want %v", tc.globs, tc.name, got, tc.want)
		}
	}
}

func TestClone(t *testing.T) {
	p, err := Parse([]byte(`{"tools": {"allow": ["a"]}, "rate_limits": {"a": {"per_second": 1}},
		"content_filters": [{"name": "f", "match": "pii", "on": ["output"], "action": "block"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cp := p.Clone()
	p.Tools.Allow[0] = "changed"
	p.RateLimits["b"] = RateLimit{PerMinute: 1}
	p.ContentFilters[0].On[0] = Prompt
	if cp.Tools.Allow[0] != "a" || len(cp.RateLimits) != 1 || cp.ContentFilters[0].On[0] != Output {
		t.Errorf("the clone shares with the original: %+v", cp)
	}
	var none *Policy
	if none.Clone() != nil {
		t.Error("Clone of nil")
	}
}

func TestApply(t *testing.T) {
	p, err := Parse([]byte(`{"content_filters": [
		{"name": "no-drop", "pattern": "(?i)drop table", "on": ["prompt"], "action": "block"},
		{"name": "mail", "match": "pii", "on": ["prompt", "output"], "action": "redact"},
		{"name": "other", "pattern": "x", "on": ["tool_input"], "action": "block"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, text, want string
		applied          []Applied
	}{
		{"clean", "Summarize the ticket.", "Summarize the ticket.", nil},
		{"redact", "Write to ada@example.com.", "Write to [REDACTED:pii].", []Applied{{"mail", Redact}}},
		{"block", "then DROP TABLE users", "then DROP TABLE users", []Applied{{"no-drop", Block}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, applied := p.Apply(Prompt, tc.text)
			if out != tc.want || !slices.Equal(applied, tc.applied) {
				t.Errorf("Apply = %q, %v; want %q, %v", out, applied, tc.want, tc.applied)
			}
		})
	}
	var none *Policy
	if out, applied := none.Apply(Prompt, "x"); out != "x" || applied != nil {
		t.Errorf("a nil policy applied %v", applied)
	}
}

func TestAccess(t *testing.T) {
	a := &Access{Run: []string{"ops"}, Tools: map[string][]string{"sql_*": {"analyst"}, "sql_exec": {"dba"}, "*": {"*"}},
		Memory: map[string][]string{"user:*": {"*"}, "hr:*": {"hr"}}}
	ops := &Principal{UserID: "o", Roles: []string{"ops", "analyst"}}
	tests := []struct {
		name string
		rule string
		got  func() (string, string)
	}{
		{"a role that may run", "", func() (string, string) { return a.CheckRun(ops, "x") }},
		{"no principal may not run", "access.run", func() (string, string) { return a.CheckRun(nil, "x") }},
		{"a glob's role", "", func() (string, string) { return a.CheckTool(ops, "sql_query") }},
		{"the most specific glob wins", "access.tools", func() (string, string) { return a.CheckTool(ops, "sql_exec") }},
		{"anyone", "", func() (string, string) { return a.CheckTool(nil, "kv_get") }},
		{"memory of anyone", "", func() (string, string) { return a.CheckMemory(nil, "user:ada") }},
		{"memory of a role", "access.memory", func() (string, string) { return a.CheckMemory(ops, "hr:salaries") }},
		{"memory no rule names", "", func() (string, string) { return a.CheckMemory(nil, "other") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if rule, reason := tt.got(); rule != tt.rule || (rule != "") != (reason != "") {
				t.Errorf("rule %q (%s), want %q", rule, reason, tt.rule)
			}
		})
	}
	if probs := (&Policy{Access: &Access{Tools: map[string][]string{"sql[": {"x"}, "kv_*": nil}}}).Check(); len(probs) != 2 {
		t.Errorf("bad access rules: %v", probs)
	}
}
