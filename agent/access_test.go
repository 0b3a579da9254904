package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// TestAccessControl attacks the policy's access rules the way a caller
// without the roles would: running an agent that is not theirs, having a
// tool of another role called, reading another's memory. Each is refused
// as a policy_violation with an audit record; a caller with the role
// gets through.
func TestAccessControl(t *testing.T) {
	const access = `"policy": {"access": {"run": ["support", "finance"], "tools": {"pa*": ["finance"]},
		"memory": {"team:*": ["finance"], "notes:*": ["*"]}}}`
	tests := []struct {
		name       string
		principal  *policy.Principal
		memory     string // the agent's memory field, or ""
		wantErr    error
		wantRule   string
		wantCalled bool // the model was called
		wantPaid   bool
	}{
		{"no principal", nil, "", ErrPolicyViolation, "access.run", false, false},
		{"another role", &policy.Principal{UserID: "eve", Roles: []string{"guest"}}, "", ErrPolicyViolation, "access.run", false, false},
		{"support, not finance: the tool is refused", &policy.Principal{UserID: "sam", Roles: []string{"support"}}, "", nil, "access.tools", true, false},
		{"finance", &policy.Principal{UserID: "fay", Roles: []string{"finance"}}, "", nil, "", true, true},
		{"a stream of another role", &policy.Principal{UserID: "sam", Roles: []string{"support"}}, `, "memory": {"stream": "team:${user_id}", "load_last": 5}`,
			ErrPolicyViolation, "access.memory", false, false},
		{"a stream anyone reads", &policy.Principal{UserID: "sam", Roles: []string{"support"}}, `, "memory": {"stream": "notes:${user_id}", "load_last": 5}`,
			nil, "access.tools", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.principal != nil {
				ctx = policy.WithPrincipal(ctx, *tt.principal)
			}
			st := openStore(t, testdb.SQLite(t))
			paid := false
			pay := tool.Must(tool.Func("pay", "Pay.", func(context.Context, echoArgs) (string, error) { paid = true; return "paid", nil }))
			m := &recorder{replies: []reply{calls(call("1", "pay", `{"text": "5"}`)), answer("done")}}
			opts := []Option{WithProvider(m, "test"), WithTools(testTools(t, pay))}
			if tt.memory != "" {
				opts = append(opts, WithMemory(memory.NewInMemory()))
			}
			a, err := New(mustSpec(t, `{"agent_name": "acct", "version": "v1", "model_name": "m", "tools": ["pay"], `+access+tt.memory+`}`), opts...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(ctx, nil, WithStore(st))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if (len(m.reqs) > 0) != tt.wantCalled || paid != tt.wantPaid {
				t.Errorf("model called %d times, paid %v", len(m.reqs), paid)
			}
			if tt.principal != nil && tt.wantCalled && res.ID != "" {
				// The run acts for the principal's user.
				if l, _ := st.AuditLog(ctx, res.ID); tt.wantRule != "" && (len(l) == 0 || l[0].UserID != tt.principal.UserID) {
					t.Errorf("the audit record is not the principal's: %+v", l)
				}
			}
			audit, _ := st.AuditLog(ctx, res.ID)
			found := tt.wantRule == ""
			for _, rec := range audit {
				if rec.Rule == tt.wantRule && rec.Decision == "block" {
					found = true
				}
			}
			if !found {
				t.Errorf("no audit record of %s: %+v", tt.wantRule, audit)
			}
			if tt.wantErr != nil && (res.Error == nil || res.Error.Code != CodePolicyViolation || strings.Contains(res.Messages[0].Content, "Prefers")) {
				t.Errorf("the refused run: %+v", res.Error)
			}
		})
	}
}
