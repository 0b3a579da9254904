package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// host records what the middleware reports, and holds every call that
// needs approval.
type host struct {
	decisions []string
	held      []string
}

func (h *host) Decided(_ context.Context, call *tool.Call, rule, decision, _ string) error {
	h.decisions = append(h.decisions, rule+":"+decision)
	return nil
}

func (h *host) Hold(_ context.Context, call *tool.Call, rule, _ string) (bool, tool.Output, error) {
	h.held = append(h.held, call.Name+":"+rule)
	return false, tool.Output{}, errors.New("held")
}

func (h *host) Replayed(*tool.Call) bool { return false }

// The policy's middleware, attacked as a hostile model would: a denied
// tool by another name's glob, a secret in the input, a rule that
// panics or returns garbage, an approval nobody can give, a burst over
// the rate limit. Each refusal reaches neither the tool nor goes
// unreported.
func TestToolsMiddleware(t *testing.T) {
	p, err := policy.Parse([]byte(`{"tools": {"allow": ["pay", "note*"], "deny": ["notes_admin"]},
		"approval": {"tools": ["pay"]},
		"rate_limits": {"note": {"per_minute": 1}},
		"content_filters": [{"name": "no-secrets", "match": "secrets", "on": ["tool_input"], "action": "redact"},
			{"name": "no-drop", "pattern": "(?i)drop\\s+table", "on": ["tool_input"], "action": "block"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	panicky := policy.RuleFunc(func(_ context.Context, c policy.Call) policy.Verdict {
		if strings.Contains(string(c.Arguments), "boom") {
			panic("rule bug")
		}
		if strings.Contains(string(c.Arguments), "garble") {
			return policy.Verdict{Arguments: json.RawMessage(`{not json`)}
		}
		return policy.Verdict{}
	})
	for _, tc := range []struct {
		name, tool, args string
		host             bool
		wantCode         string // "" when the tool runs
		wantArgs         string // what the tool got
		decision         string
	}{
		{"an allowed call", "note", `{"text": "hi"}`, true, "", `{"text": "hi"}`, ""},
		{"denied by name though the allow glob matches", "notes_admin", `{}`, true, "policy_violation", "", "tools.deny:block"},
		{"not allowed", "shell", `{}`, true, "policy_violation", "", "tools.allow:block"},
		{"a secret in the input is redacted", "notebook", `{"text": "key sk-proj-abcdefghijklmnopqrstuvwx01"}`, true, "",
			`{"text": "key [REDACTED:secret]"}`, "content_filters.no-secrets:redact"},
		{"an escaped secret in the input is redacted", "notebook", `{"text": "key \u0073k-proj-abcdefghijklmnopqrstuvwx01"}`, true, "",
			`{"text": "key [REDACTED:secret]"}`, "content_filters.no-secrets:redact"},
		{"a blocked pattern", "notebook", `{"text": "DROP  TABLE users"}`, true, "policy_violation", "", "content_filters.no-drop:block"},
		{"a rule that panics blocks", "notebook", `{"text": "boom"}`, true, "policy_violation", "", "rules.guard:block"},
		{"a rule's arguments that are not JSON block", "notebook", `{"text": "garble"}`, true, "policy_violation", "", "rules.guard:block"},
		{"an approval nobody can give", "pay", `{}`, false, "policy_violation", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			mw := policy.Tools(p, policy.NamedRule{Name: "guard", Rule: panicky})
			h := mw(func(_ context.Context, c *tool.Call) (tool.Output, error) {
				got = string(c.Arguments)
				return tool.Output{}, nil
			})
			rec := &host{}
			ctx := context.Background()
			if tc.host {
				ctx = policy.WithHost(ctx, rec)
			}
			_, err := h(ctx, &tool.Call{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
			var d *tool.ErrorDetails
			switch {
			case tc.wantCode == "" && (err != nil || got != tc.wantArgs):
				t.Errorf("err %v, the tool got %q; want it to run with %q", err, got, tc.wantArgs)
			case tc.wantCode != "" && (!errors.As(err, &d) || d.Type != tc.wantCode || got != ""):
				t.Errorf("err %v, the tool got %q; want %s and no call", err, got, tc.wantCode)
			}
			if tc.decision != "" && !strings.Contains(strings.Join(rec.decisions, " "), tc.decision) {
				t.Errorf("decisions %v; want %s", rec.decisions, tc.decision)
			}
		})
	}
	t.Run("a call that needs approval is held by the run", func(t *testing.T) {
		rec := &host{}
		_, err := policy.Tools(p)(func(context.Context, *tool.Call) (tool.Output, error) {
			t.Error("a held call ran")
			return tool.Output{}, nil
		})(policy.WithHost(context.Background(), rec), &tool.Call{Name: "pay", Arguments: json.RawMessage(`{}`)})
		if err == nil || len(rec.held) != 1 || rec.held[0] != "pay:approval.tools" {
			t.Errorf("err %v, held %v", err, rec.held)
		}
	})
	t.Run("a burst over the rate limit is blocked when the wait passes the deadline", func(t *testing.T) {
		rec := &host{}
		h := policy.Tools(p)(func(context.Context, *tool.Call) (tool.Output, error) { return tool.Output{}, nil })
		ctx, cancel := context.WithTimeout(policy.WithHost(context.Background(), rec), time.Second)
		defer cancel()
		var codes []string
		for range 2 {
			_, err := h(ctx, &tool.Call{Name: "note", Arguments: json.RawMessage(`{}`)})
			var d *tool.ErrorDetails
			if errors.As(err, &d) {
				codes = append(codes, d.Type)
			} else {
				codes = append(codes, "ran")
			}
		}
		if strings.Join(codes, " ") != "ran rate_limited" {
			t.Errorf("two calls within a minute: %v; want the second rate_limited", codes)
		}
	})
}
