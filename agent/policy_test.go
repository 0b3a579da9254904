package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// The payer agent with a policy: a blocked call is a policy_violation
// observation, the run goes on, the tool is not called, a policy_decision
// is emitted and, in a stored run, audited.
func TestPolicyTools(t *testing.T) {
	for _, tc := range []struct {
		name, policy, rule string
	}{
		{"deny", `{"tools": {"deny": ["pay"]}}`, "tools.deny"},
		{"deny by glob", `{"tools": {"deny": ["p*"]}}`, "tools.deny"},
		{"not allowed", `{"tools": {"allow": ["ad*"]}}`, "tools.allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, testdb.SQLite(t))
			l := ledger{filepath.Join(t.TempDir(), "ledger")}
			sp, err := spec.Load(payerSpec)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Policy, err = policy.Parse([]byte(tc.policy)); err != nil {
				t.Fatal(err)
			}
			a, err := New(sp, WithTools(durableTools(t, l, true, nil)), WithBaseDir(filepath.Dir(payerSpec)))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var decisions []event.Event
			res, err := a.Run(ctx, payerInput, WithStore(st), WithUser("ada"), WithEvents(func(e event.Event) {
				if e.Type == event.PolicyDecision {
					mu.Lock()
					decisions = append(decisions, e)
					mu.Unlock()
				}
			}))
			if err != nil || !res.Success {
				t.Fatalf("the run should go on past a blocked call: %v", err)
			}
			pay := res.Steps[1]
			if pay.Action.Tool != "pay" || !strings.Contains(pay.Observation, `"type":"policy_violation"`) {
				t.Errorf("the blocked call's step: %+v", pay)
			}
			if res.Steps[0].Action.Error != "" || res.Steps[2].Action.Error != "" {
				t.Error("a call the policy allows was blocked")
			}
			if n := len(l.sends(t)); n != 0 {
				t.Errorf("the blocked tool was called %d times", n)
			}
			if len(decisions) != 1 || decisions[0].Data["rule"] != tc.rule || decisions[0].Data["decision"] != "block" ||
				decisions[0].Data["target"] != "tool:pay" {
				t.Errorf("policy_decision events: %+v", decisions)
			}
			recs, err := st.AuditLog(ctx, res.ID)
			if err != nil || len(recs) != 1 || recs[0].Rule != tc.rule || recs[0].UserID != "ada" || recs[0].Agent != "payer" {
				t.Errorf("audit log: %+v, %v", recs, err)
			}
			if err := st.VerifyAudit(ctx); err != nil {
				t.Error(err)
			}
			// The call was blocked before the run log: no intent, no result.
			log, _ := runlog.Read(ctx, st, res.ID)
			for _, c := range log.ToolCalls() {
				if c.Tool == "pay" {
					t.Errorf("the blocked call is in the run log: %+v", c)
				}
			}
		})
	}
}

// A resumed run that replays a blocked call does not audit it again.
func TestPolicyReplayedIsNotAuditedAgain(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	sp, _ := spec.Load(payerSpec)
	sp.Policy, _ = policy.Parse([]byte(`{"tools": {"deny": ["pay"]}}`))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a, err := New(sp, WithTools(durableTools(t, l, true, nil)), WithBaseDir(filepath.Dir(payerSpec)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Replay(ctx, st, res.ID)
	if err != nil || !rep.Identical() {
		t.Fatalf("replay of a run with a blocked call: %v %v", err, rep.Differences)
	}
	if recs, _ := st.AuditLog(ctx, res.ID); len(recs) != 1 {
		t.Errorf("%d audit records after a replay, want the original's 1", len(recs))
	}
}

// A rate limit waits when the wait fits the run's deadline, and blocks
// the call as rate_limited when it does not.
func TestPolicyRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		timeoutMS    int64
		decision     string
	}{
		{"waits", `{"rate_limits": {"add": {"per_second": 4}}}`, 0, "wait"},
		{"waits for every tool", `{"rate_limits": {"*": {"per_second": 4, "burst": 2}}}`, 0, "wait"},
		{"blocks past the deadline", `{"rate_limits": {"add": {"per_minute": 1}}}`, 5000, "block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, testdb.SQLite(t))
			sp, _ := spec.Load(payerSpec)
			sp.Policy, _ = policy.Parse([]byte(tc.policy))
			sp.Limits.TimeoutMS = tc.timeoutMS
			l := ledger{filepath.Join(t.TempDir(), "ledger")}
			a, err := New(sp, WithTools(durableTools(t, l, true, nil)), WithBaseDir(filepath.Dir(payerSpec)))
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(ctx, payerInput, WithStore(st))
			if err != nil || !res.Success {
				t.Fatalf("run: %v", err)
			}
			recs, _ := st.AuditLog(ctx, res.ID)
			if len(recs) == 0 || recs[0].Decision != tc.decision || !strings.HasPrefix(recs[0].Rule, "rate_limits.") {
				t.Fatalf("audit: %+v; want a %s of a rate limit", recs, tc.decision)
			}
			second := res.Steps[2] // the second add
			switch tc.decision {
			case "wait":
				if second.Action.Error != "" {
					t.Errorf("a call that waited failed: %s", second.Action.Error)
				}
			case "block":
				if !strings.Contains(second.Observation, `"type":"rate_limited"`) {
					t.Errorf("the second add: %+v; want rate_limited", second)
				}
			}
		})
	}
	sp, _ := spec.Load(payerSpec)
	sp.Policy, _ = policy.Parse([]byte(`{"rate_limits": {"ad": {"per_second": 1}}}`))
	if _, err := New(sp, WithTools(durableTools(t, ledger{}, true, nil)), WithBaseDir(filepath.Dir(payerSpec))); err == nil ||
		!strings.Contains(err.Error(), `policy.rate_limits.ad: the agent has no tool "ad"`) {
		t.Errorf("a rate limit of an unknown tool: %v", err)
	}
}

// A call the approval rule names pauses the run; a resume approves it
// (it runs) or denies it with a reason (the model is told), and a run
// resumed again later keeps the decision.
func TestPolicyApproval(t *testing.T) {
	for _, decide := range []string{"approve", "approve by key", "deny"} {
		t.Run(decide, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, testdb.SQLite(t))
			sp, _ := spec.Load(payerSpec)
			sp.Policy, _ = policy.Parse([]byte(`{"approval": {"tools": ["pa*"]}}`))
			l := ledger{filepath.Join(t.TempDir(), "ledger")}
			a, err := New(sp, WithTools(durableTools(t, l, true, nil)), WithBaseDir(filepath.Dir(payerSpec)))
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(ctx, payerInput, WithStore(st))
			if !errors.Is(err, ErrAwaitingApproval) || res.TerminateReason != ReasonAwaitingApproval {
				t.Fatalf("run = %v (%s); want it to await approval", err, res.TerminateReason)
			}
			if !strings.Contains(err.Error(), "call_2_1") || len(l.sends(t)) != 0 {
				t.Fatalf("the paused run: %v, %d payments", err, len(l.sends(t)))
			}
			if run, _ := st.Get(ctx, res.ID); run.Status != store.AwaitingApproval {
				t.Errorf("stored status %s", run.Status)
			}
			if _, err := a.Resume(ctx, st, res.ID, Approve("call_9_9")); !errors.Is(err, ErrNoSuchCall) || !strings.Contains(err.Error(), "call_2_1") {
				t.Errorf("approving another call: %v", err)
			}
			var opts []RunOption
			switch decide {
			case "approve":
				opts = []RunOption{Approve("call_2_1")}
			case "approve by key":
				opts = []RunOption{Approve(res.ID + ":2:0")}
			case "deny":
				opts = []RunOption{Deny("call_2_1"), WithDenyReason("the invoice is disputed")}
			}
			sess, err := a.Resume(ctx, st, res.ID, opts...)
			if err != nil {
				t.Fatal(err)
			}
			res2, err := sess.Run(ctx)
			if err != nil || !res2.Success {
				t.Fatalf("after %s: %v", decide, err)
			}
			pay := res2.Steps[1]
			if decide == "deny" {
				if len(l.sends(t)) != 0 || !strings.Contains(pay.Observation, "policy_violation") || !strings.Contains(pay.Observation, "the invoice is disputed") {
					t.Errorf("denied: %d payments, step %+v", len(l.sends(t)), pay)
				}
			} else if len(l.sends(t)) != 1 || pay.Action.Error != "" {
				t.Errorf("approved: %d payments, error %q", len(l.sends(t)), pay.Action.Error)
			}
			recs, _ := st.AuditLog(ctx, res.ID)
			var decisions []string
			for _, r := range recs {
				decisions = append(decisions, r.Decision)
			}
			want := map[string]string{"approve": "pause approve", "approve by key": "pause approve", "deny": "pause deny"}[decide]
			if strings.Join(decisions, " ") != want {
				t.Errorf("audit decisions %v, want %s", decisions, want)
			}
			// A replay keeps the decision: the same Result, no new payment.
			rep, err := a.Replay(ctx, st, res.ID)
			if err != nil || !rep.Identical() {
				t.Errorf("replay after the decision: %v %v", err, rep.Differences)
			}
		})
	}
}

// Content filters on tool input: block refuses the call, redact hands
// the tool the input with what the filter finds replaced.
func TestPolicyInputFilters(t *testing.T) {
	var got []string
	var mu sync.Mutex
	echo := tool.Must(tool.Func("note", "Keep a note.", func(_ context.Context, in echoArgs) (string, error) {
		mu.Lock()
		got = append(got, in.Text)
		mu.Unlock()
		return "kept", nil
	}, tool.WithIdempotency(tool.Idempotent)))
	reg, _ := tool.NewRegistry(echo)
	for _, tc := range []struct {
		name, filter, text, want, observation string
	}{
		{"redact secrets", `{"name": "no-secrets", "match": "secrets", "on": ["tool_input"], "action": "redact"}`,
			"key sk-proj-abcdefghijklmnopqrstuvwx01", "key [REDACTED:secret]", "kept"},
		{"redact pii", `{"name": "no-pii", "match": "pii", "on": ["tool_input"], "action": "redact"}`,
			"mail ada@example.com", "mail [REDACTED:pii]", "kept"},
		{"block a pattern", `{"name": "no-drop", "pattern": "(?i)drop\\s+table", "on": ["tool_input"], "action": "block"}`,
			"DROP TABLE users", "", "policy_violation"},
		{"nothing found", `{"name": "no-drop", "pattern": "(?i)drop\\s+table", "on": ["tool_input"], "action": "block"}`,
			"select 1", "select 1", "kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			sp := mustSpec(t, `{"agent_name": "noter", "version": "v1", "model_name": "scripted:x", "tools": ["note"],
				"policy": {"content_filters": [`+tc.filter+`]}}`)
			args, _ := json.Marshal(map[string]string{"text": tc.text})
			script, err := scripted.Parse("s", []byte(`{"turns": [{"tool_calls": [{"name": "note", "arguments": `+string(args)+`}]}, {"content": "done"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(sp, WithProvider(script.Model(), "scripted"), WithTools(reg))
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
				t.Errorf("the tool got %q, want %q", got, tc.want)
			}
			// The trace keeps what the model wrote, with secrets redacted
			// as everything that leaves a run.
			if step := res.Steps[0]; !strings.Contains(step.Observation, tc.observation) || string(step.Action.Input) != string(a.redact.Bytes(args)) {
				t.Errorf("step %+v: want %q observed and the model's arguments in the trace", step, tc.observation)
			}
		})
	}
}

// Content filters on the output: block fails the run without its answer,
// redact returns the answer with what the filter finds replaced.
func TestPolicyOutputFilters(t *testing.T) {
	for _, tc := range []struct {
		name, action string
		success      bool
		want         string
	}{
		{"block", "block", false, ""},
		{"redact", "redact", true, "Reach us at [REDACTED:pii]."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := mustSpec(t, `{"agent_name": "writer", "version": "v1", "model_name": "scripted:x",
				"policy": {"content_filters": [{"name": "no-pii", "match": "pii", "on": ["output"], "action": "`+tc.action+`"}]}}`)
			script, _ := scripted.Parse("s", []byte(`{"turns": [{"content": "Reach us at ada@example.com."}]}`))
			a, err := New(sp, WithProvider(script.Model(), "scripted"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(context.Background(), nil)
			if res.Success != tc.success {
				t.Fatalf("success %v (%v), want %v", res.Success, err, tc.success)
			}
			if tc.success {
				if res.Result != tc.want || res.RawContent != tc.want {
					t.Errorf("result %q, raw %q; want %q", res.Result, res.RawContent, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrPolicyViolation) || res.Error.Code != CodePolicyViolation || res.Result != nil {
				t.Errorf("blocked: %v, %+v, result %v", err, res.Error, res.Result)
			}
			if b, _ := json.Marshal(res); strings.Contains(string(b), "ada@example.com") {
				t.Errorf("the blocked answer is in the Result: %s", b)
			}
		})
	}
}

// TestInputFilters: content filters on "input" look at the run's own
// input and the prompt rendered from it: a redacting one hides what it
// finds from the model and the log, a blocking one refuses the run
// before any model call, with an audit record. A caller trying to slip
// a card number past the filter inside the input gets neither through.
func TestInputFilters(t *testing.T) {
	// The card as a caller would slip it past a filter: spaced, dashed,
	// bare, or deep inside a structured value.
	cards := []struct {
		name string
		card any
	}{
		{"spaced", "4111 1111 1111 1111"},
		{"dashed", "4111-1111-1111-1111"},
		{"bare", "4111111111111111"},
		{"nested", map[string]any{"wallet": []any{map[string]any{"number": "4111 1111 1111 1111"}}}},
	}
	digits := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, s)
	}
	for _, tc := range []struct {
		name, action string
		wantErr      error
	}{
		{"redact", "redact", nil},
		{"block", "block", ErrPolicyViolation},
	} {
		for _, cc := range cards {
			t.Run(tc.name+"/"+cc.name, func(t *testing.T) {
				testInputFilter(t, tc.action, tc.wantErr, cc.card, digits)
			})
		}
	}
}

func testInputFilter(t *testing.T, action string, wantErr error, card any, digits func(string) string) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	sp := mustSpec(t, `{`+base+`, "mode": "tools", "purpose_text": "Pay with ${card}.", "input_keys": ["who", "card"],
		"policy": {"content_filters": [{"name": "cards", "match": "pii", "on": ["input"], "action": "`+action+`"}]}}`)
	m := &recorder{replies: []reply{answer("paid")}}
	a, err := New(sp, WithProvider(m, "test"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, map[string]any{"who": "Ada", "card": card}, WithStore(st))
	if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
		t.Fatalf("err = %v, want %v", err, wantErr)
	}
	for _, req := range m.reqs {
		for _, msg := range req.Messages {
			if strings.Contains(digits(msg.Content), "4111111111111111") {
				t.Errorf("the model saw the card: %q", msg.Content)
			}
		}
	}
	if action == "block" && (len(m.reqs) != 0 || res.Error.Code != CodePolicyViolation) {
		t.Errorf("a blocked input reached the model (%d calls) or ended as %+v", len(m.reqs), res.Error)
	}
	recs, _ := st.Records(ctx, res.ID, 0)
	for _, rec := range recs {
		if strings.Contains(digits(string(rec.Data)), "4111111111111111") {
			t.Errorf("the run log keeps the card: %s", rec.Data)
		}
	}
	audit, _ := st.AuditLog(ctx, res.ID)
	if len(audit) != 1 || audit[0].Rule != "content_filters.cards" || audit[0].Decision != action || audit[0].Target != "input" {
		t.Errorf("audit %+v", audit)
	}
}
