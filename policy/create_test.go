package policy

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"*", "mcp:fs", true},
		{"*", "", true},
		{"mcp:*", "mcp:fs", true},
		{"mcp:*", "mcp:", true},
		{"mcp:*", "a2a:mcp:x", false},
		{"a2a:*.example.com", "a2a:agents.example.com", true},
		{"a2a:*.example.com", "a2a:example.com", false},
		{"a2a:*.example.com", "a2a:evil.com/.example.com", true}, // "*" spans "/": a host has none
		{"tool:sql_*", "tool:sql_query", true},
		{"tool:sql_*", "tool:sqlx", false},
		{"tool:?s", "tool:ls", true},
		{"tool:?s", "tool:lss", false},
		{"agent:*-bot*", "agent:a-bot-2", true},
		{"agent:*-bot*", "agent:abot", false},
		{"connector:shell", "connector:shell", true},
		{"connector:shell", "connector:shellx", false},
		{"**x", "abx", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"tool:?", "tool:é", true},
		{"tool:?", "tool:éé", false},
	} {
		t.Run(tc.glob+"~"+tc.name, func(t *testing.T) {
			if got := globMatch(tc.glob, tc.name); got != tc.want {
				t.Errorf("globMatch(%q, %q) = %v", tc.glob, tc.name, got)
			}
		})
	}
}

// TestCreationRefused: the most specific glob decides; what no glob
// names is anyone's; a caller with no principal is refused by any rule
// that does not name "*"; every refusal is named, in order.
func TestCreationRefused(t *testing.T) {
	rules := Creation{
		"*":               {"admin"},
		"agent:*":         {"builder", "admin"},
		"tool:http_*":     {"builder", "admin"},
		"connector:http":  {"builder", "admin"},
		"tool:calculator": {"*"},
	}
	builder := &Principal{UserID: "ann", Roles: []string{"builder"}}
	admin := &Principal{UserID: "root", Roles: []string{"admin"}}
	for _, tc := range []struct {
		name  string
		p     *Principal
		rules Creation
		what  []string
		want  []string // substrings of each refusal, in order
	}{
		{"builder's own things", builder, rules, []string{"agent:a", "connector:http", "tool:http_get", "tool:calculator"}, nil},
		{"builder starts a server", builder, rules, []string{"agent:a", "mcp:fs", "connector:shell"},
			[]string{`user ann (roles: builder) may not create mcp:fs: "*" is for the roles admin`, `connector:shell: "*"`}},
		{"admin everything", admin, rules, []string{"mcp:fs", "connector:shell", "tool:rm"}, nil},
		{"no principal", nil, rules, []string{"tool:calculator", "agent:a"}, []string{`a caller without roles may not create agent:a`}},
		{"no rules", nil, nil, []string{"mcp:fs"}, nil},
		{"nothing named", builder, Creation{"mcp:*": {"admin"}}, []string{"agent:a", "tool:x", "mcp:fs"}, []string{"mcp:fs"}},
		{"literal characters decide", builder, Creation{"tool:*********": {"admin"}, "tool:http_get": {"builder"}}, []string{"tool:http_get", "tool:rm"},
			[]string{`tool:rm: "tool:*********" is for the roles admin`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.rules.Refused(tc.p, tc.what)
			if len(got) != len(tc.want) {
				t.Fatalf("refused %q, want %d refusals", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("refusal %d %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCreationProblems(t *testing.T) {
	got := Creation{"": {"admin"}, "mcp:*": nil, "tool:x": {""}, "agent:*": {"*"}}.Problems()
	want := []string{"creation: an empty glob", `creation "mcp:*": name at least one role`, `creation "tool:x": name at least one role`}
	if len(got) != len(want) {
		t.Fatalf("problems %q", got)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("problem %d %q, want %q", i, got[i], w)
		}
	}
}
