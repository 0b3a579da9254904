package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
)

// A host's own rule sees every call with who makes it, and blocks,
// changes or holds the calls it decides about; each such decision is
// audited under rules.NAME, a plain allow is not.
func TestHostRules(t *testing.T) {
	overFour := func(v policy.Verdict) policy.Rule {
		return policy.RuleFunc(func(_ context.Context, c policy.Call) policy.Verdict {
			var in payArgs
			if c.Tool != "pay" || json.Unmarshal(c.Arguments, &in) != nil || in.Amount <= 4 {
				return policy.Verdict{}
			}
			return v
		})
	}
	for _, tc := range []struct {
		name     string
		rule     policy.Rule
		decision string // audited; "" when none
		paid     int    // payments sent
		observe  string // in the pay step's observation
	}{
		{"allow", overFour(policy.Verdict{}), "", 1, `"paid":5`},
		{"block", overFour(policy.Verdict{Block: true, Reason: "over the limit of 4"}), "block", 0, "over the limit of 4"},
		{"block without a reason", overFour(policy.Verdict{Block: true}), "block", 0, "the rule limit blocks the call"},
		{"modify", overFour(policy.Verdict{Arguments: json.RawMessage(`{"to":"bob","amount":4}`), Reason: "capped at 4"}), "modify", 1, `"paid":4`},
		{"not JSON", overFour(policy.Verdict{Arguments: json.RawMessage(`{"to":`)}), "block", 0, "arguments that are not JSON"},
		{"panic", overFour2(func() { panic("limit table missing") }), "block", 0, "the rule limit failed: limit table missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, testdb.SQLite(t))
			l := ledger{filepath.Join(t.TempDir(), "ledger")}
			sp, err := spec.Load(payerSpec)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen *policy.Call
			spy := policy.RuleFunc(func(_ context.Context, c policy.Call) policy.Verdict {
				if c.Tool == "pay" {
					mu.Lock()
					seen = &c
					mu.Unlock()
				}
				return policy.Verdict{}
			})
			a, err := New(sp, WithTools(durableTools(t, l, true, nil)), WithBaseDir(filepath.Dir(payerSpec)),
				WithRule("spy", spy), WithRule("limit", tc.rule))
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(ctx, payerInput, WithStore(st), WithUser("ada"))
			if err != nil || !res.Success {
				t.Fatalf("run: %v", err)
			}
			if n := len(l.sends(t)); n != tc.paid {
				t.Errorf("%d payments, want %d", n, tc.paid)
			}
			if pay := res.Steps[1]; !strings.Contains(pay.Observation, tc.observe) {
				t.Errorf("the pay step's observation %s, want %q in it", pay.Observation, tc.observe)
			}
			if seen == nil || seen.RunID != res.ID || seen.Agent != "payer" || seen.UserID != "ada" || string(seen.Arguments) != `{"to": "bob", "amount": 5}` {
				t.Errorf("the rule saw %+v", seen)
			}
			recs, err := st.AuditLog(ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.decision == "" && len(recs) != 0:
				t.Errorf("a plain allow was audited: %+v", recs)
			case tc.decision != "" && (len(recs) != 1 || recs[0].Rule != "rules.limit" || recs[0].Decision != tc.decision || recs[0].Target != "tool:pay"):
				t.Errorf("audit records %+v, want one %s by rules.limit", recs, tc.decision)
			}
		})
	}
}

func overFour2(fn func()) policy.Rule {
	return policy.RuleFunc(func(_ context.Context, c policy.Call) policy.Verdict {
		if c.Tool == "pay" {
			fn()
		}
		return policy.Verdict{}
	})
}

// A rule that asks for approval pauses the run like approval.tools; the
// resume decides, and the rule's reason is audited with the pause.
func TestHostRuleApproval(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	sp, _ := spec.Load(payerSpec)
	big := policy.RuleFunc(func(_ context.Context, c policy.Call) policy.Verdict {
		return policy.Verdict{Approval: c.Tool == "pay", Reason: "payments need a second pair of eyes"}
	})
	a, err := New(sp, WithTools(durableTools(t, l, true, nil)), WithBaseDir(filepath.Dir(payerSpec)), WithRule("four-eyes", big))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) || !strings.Contains(err.Error(), "policy.rules.four-eyes") {
		t.Fatalf("run = %v; want it to await approval by rules.four-eyes", err)
	}
	sess, err := a.Resume(ctx, st, res.ID, Approve("call_2_1"))
	if err != nil {
		t.Fatal(err)
	}
	if res2, err := sess.Run(ctx); err != nil || !res2.Success || len(l.sends(t)) != 1 {
		t.Fatalf("approved: %v, %d payments", err, len(l.sends(t)))
	}
	recs, _ := st.AuditLog(ctx, res.ID)
	if len(recs) != 2 || recs[0].Decision != "pause" || !strings.Contains(recs[0].Reason, "second pair of eyes") ||
		recs[1].Decision != "approve" || recs[1].Rule != "rules.four-eyes" {
		t.Errorf("audit records %+v", recs)
	}
}

// A rule without a usable name, a nil rule and two rules of one name are
// refused when the agent is built.
func TestHostRuleNames(t *testing.T) {
	ok := policy.RuleFunc(func(context.Context, policy.Call) policy.Verdict { return policy.Verdict{} })
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"empty", []Option{WithRule("", ok)}, `the name "" is not a name`},
		{"space", []Option{WithRule("two words", ok)}, `"two words" is not a name`},
		{"nil", []Option{WithRule("x", nil)}, "the rule x is nil"},
		{"twice", []Option{WithRule("x", ok), WithRule("x", ok)}, "two rules are named x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, _ := spec.Load(payerSpec)
			opts := append([]Option{WithTools(durableTools(t, ledger{}, true, nil)), WithBaseDir(filepath.Dir(payerSpec))}, tc.opts...)
			_, err := New(sp, opts...)
			var se *spec.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v; want a spec error with %q", err, tc.want)
			}
		})
	}
}
