package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/memory/inmem"
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
				opts = append(opts, WithMemory(inmem.New()))
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

// TestAccessHandoff attacks access.run through a handoff: a guest may run
// the front agent, and the model transfers the conversation to an agent
// only admins may run. The transfer is refused, audited, and the admin
// agent never answers.
func TestAccessHandoff(t *testing.T) {
	guest, admin := policy.Principal{UserID: "eve", Roles: []string{"guest"}}, policy.Principal{UserID: "ada", Roles: []string{"guest", "admin"}}
	for _, tt := range []struct {
		name      string
		principal policy.Principal
		policy    string // the front agent's, besides access.run
		wantAdmin bool
		wantRule  string
	}{
		{"a guest is refused", guest, "", false, "access.run"},
		{"an admin is transferred", admin, "", true, ""},
		{"the transfer tool denied", admin, `"tools": {"deny": ["transfer_to_admin"]}, `, false, "tools.deny"},
		{"the transfer tool for admins", guest, `"access": {"run": ["guest"], "tools": {"transfer_to_*": ["admin"]}}, `, false, "access.tools"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := policy.WithPrincipal(context.Background(), tt.principal)
			adminModel := &recorder{replies: []reply{answer("the admin's secret answer")}}
			admin, err := New(mustSpec(t, `{"agent_name": "admin", "version": "v1", "model_name": "m",
				"policy": {"access": {"run": ["admin"]}}}`), WithProvider(adminModel, "test"))
			if err != nil {
				t.Fatal(err)
			}
			reg := NewRegistry()
			if err := reg.Register(admin); err != nil {
				t.Fatal(err)
			}
			front := &recorder{replies: []reply{calls(call("1", "transfer_to_admin", `{}`)), answer("front answers")}}
			pol := tt.policy + `"access": {"run": ["guest"]}`
			if strings.Contains(tt.policy, `"access"`) {
				pol = strings.TrimSuffix(tt.policy, ", ")
			}
			a, err := New(mustSpec(t, `{"agent_name": "front", "version": "v1", "model_name": "m", "handoffs": ["admin"],
				"policy": {`+pol+`}}`), WithProvider(front, "test"), WithRegistry(reg))
			if err != nil {
				t.Fatal(err)
			}
			st := openStore(t, testdb.SQLite(t))
			res, err := a.Run(ctx, nil, WithStore(st))
			if err != nil {
				t.Fatal(err)
			}
			transferred := len(res.Handoffs) > 0
			if transferred != tt.wantAdmin || (res.Result == "the admin's secret answer") != tt.wantAdmin {
				t.Fatalf("handoffs %v, result %q", res.Handoffs, res.Result)
			}
			if tt.wantAdmin {
				return
			}
			if len(adminModel.reqs) != 0 {
				t.Error("the admin agent's model was called")
			}
			if act := res.Steps[0].Action; act == nil || act.Error == "" {
				t.Errorf("the transfer's step: %+v", res.Steps[0])
			}
			audit, _ := st.AuditLog(ctx, res.ID)
			if len(audit) != 1 || audit[0].Rule != tt.wantRule || audit[0].UserID != tt.principal.UserID {
				t.Errorf("audit %+v", audit)
			}
		})
	}
}

// TestAuditUnsampled: a run tracing does not record still leaves its
// policy decisions in the audit log; turning tracing off is no way to act
// unaudited.
func TestAuditUnsampled(t *testing.T) {
	ctx := policy.WithPrincipal(context.Background(), policy.Principal{UserID: "sam", Roles: []string{"support"}})
	st := openStore(t, testdb.SQLite(t))
	pay := tool.Must(tool.Func("pay", "Pay.", func(context.Context, echoArgs) (string, error) { return "paid", nil }))
	m := &recorder{replies: []reply{calls(call("1", "pay", `{"text": "5"}`)), answer("done")}}
	a, err := New(mustSpec(t, `{"agent_name": "acct", "version": "v1", "model_name": "m", "tools": ["pay"],
		"tracing": {"enabled": false}, "policy": {"access": {"tools": {"pay": ["finance"]}}}}`),
		WithProvider(m, "test"), WithTools(testTools(t, pay)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(ctx, nil, WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, res.ID); err == nil {
		t.Error("the unsampled run was recorded")
	}
	audit, err := st.AuditLog(ctx, res.ID)
	if err != nil || len(audit) != 1 || audit[0].Rule != "access.tools" || audit[0].UserID != "sam" {
		t.Fatalf("audit %+v, %v", audit, err)
	}
	if err := st.VerifyAudit(ctx); err != nil {
		t.Error(err)
	}
}

// TestAccessOtherUser attacks the user a run acts for: a caller whose
// principal is sam names another user with WithUser, to read that user's
// memory. The run is refused and audited.
func TestAccessOtherUser(t *testing.T) {
	ctx := policy.WithPrincipal(context.Background(), policy.Principal{UserID: "sam", Roles: []string{"support"}})
	for _, tt := range []struct {
		user    string
		wantErr bool
	}{{"fay", true}, {"sam", false}, {"", false}} {
		t.Run("WithUser("+tt.user+")", func(t *testing.T) {
			st := openStore(t, testdb.SQLite(t))
			m := &recorder{replies: []reply{answer("done")}}
			a, err := New(mustSpec(t, `{"agent_name": "notes", "version": "v1", "model_name": "m"}`), WithProvider(m, "test"))
			if err != nil {
				t.Fatal(err)
			}
			var seen string
			res, err := a.Run(ctx, nil, WithStore(st), WithUser(tt.user))
			if res != nil {
				seen = res.ID
			}
			if gotErr := errors.Is(err, ErrPolicyViolation); gotErr != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr != (len(m.reqs) == 0) {
				t.Errorf("model called %d times", len(m.reqs))
			}
			if !tt.wantErr {
				return
			}
			audit, _ := st.AuditLog(ctx, seen)
			if len(audit) != 1 || audit[0].Rule != "access.user" || audit[0].UserID != "sam" || audit[0].Target != "user:fay" {
				t.Errorf("audit %+v", audit)
			}
		})
	}
}
