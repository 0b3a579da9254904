package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// approvalAgent is the payer under an approval rule on pay, playing
// turns: a hostile or careless provider that reuses call ids.
func approvalAgent(t *testing.T, l ledger, turns string) *Agent {
	t.Helper()
	script, err := scripted.Parse("reuse", []byte(`{"turns": [`+turns+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := spec.Load(payerSpec)
	sp.Policy, _ = policy.Parse([]byte(`{"approval": {"tools": ["pay"]}}`))
	a, err := New(sp, WithProvider(script.Model(), "scripted"), WithTools(durableTools(t, l, true, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An approval of call_1 in turn 1 does not approve another call_1 in
// turn 2: the second pauses the run again, and runs only once approved
// in its own right.
func TestApprovalIsBoundToOneCall(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `
		{"tool_calls": [{"id": "call_1", "name": "pay", "arguments": {"to": "bob", "amount": 5}}]},
		{"tool_calls": [{"id": "call_1", "name": "pay", "arguments": {"to": "mallory", "amount": 500}}]},
		{"content": "Paid."}`)
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v; want it to await approval", err)
	}
	sess, err := a.Resume(ctx, st, res.ID, Approve("call_1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Run(ctx)
	if !errors.Is(err, ErrAwaitingApproval) || !strings.Contains(err.Error(), "key "+res.ID+":2:0") {
		t.Fatalf("after approving turn 1's call_1: %v; want turn 2's call_1 to wait", err)
	}
	if got := l.sends(t); len(got) != 1 || got[0] != res.ID+":1:0" {
		t.Fatalf("payments %v; want only turn 1's", got)
	}
	sess, err = a.Resume(ctx, st, res.ID, Deny("call_1"))
	if err != nil {
		t.Fatal(err)
	}
	res2, err := sess.Run(ctx)
	if err != nil || !res2.Success {
		t.Fatalf("after denying turn 2's call_1: %v", err)
	}
	if got := l.sends(t); len(got) != 1 {
		t.Errorf("payments %v; the denied call ran", got)
	}
	if obs := res2.Steps[1].Observation; !strings.Contains(obs, "policy_violation") {
		t.Errorf("turn 2's call: %q; want it denied", obs)
	}
	if obs := res2.Steps[0].Observation; strings.Contains(obs, "policy_violation") {
		t.Errorf("turn 1's call: %q; the later denial reached it", obs)
	}
}

// A call id that names two waiting calls decides neither: the caller
// must give a key. A decision given to a run that is not resumed is
// refused: nothing waits for it.
func TestApprovalOfAnAmbiguousID(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `
		{"tool_calls": [{"id": "x", "name": "pay", "arguments": {"to": "bob", "amount": 5}},
		                {"id": "x", "name": "pay", "arguments": {"to": "eve", "amount": 9}}]},
		{"content": "Paid."}`)
	if _, err := a.Run(ctx, payerInput, WithStore(st), Approve("x")); !errors.Is(err, ErrNoSuchCall) {
		t.Errorf("a fresh run with a decision: %v; want ErrNoSuchCall", err)
	}
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v", err)
	}
	_, err = a.Resume(ctx, st, res.ID, Approve("x"))
	if !errors.Is(err, ErrNoSuchCall) || !strings.Contains(err.Error(), res.ID+":1:0") || !strings.Contains(err.Error(), res.ID+":1:1") {
		t.Fatalf("approving an id two calls share: %v; want a refusal naming both keys", err)
	}
	sess, err := a.Resume(ctx, st, res.ID, Approve(res.ID+":1:1"), Deny(res.ID+":1:0"))
	if err != nil {
		t.Fatal(err)
	}
	res2, err := sess.Run(ctx)
	if err != nil || !res2.Success {
		t.Fatalf("after deciding by key: %v", err)
	}
	if got := l.sends(t); len(got) != 1 || got[0] != res.ID+":1:1" {
		t.Errorf("payments %v; want only the approved key", got)
	}
}

// A refused resume gives the run's lease back at once: the next resume
// does not find it held.
func TestRefusedResumeReleasesTheLease(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `{"tool_calls": [{"id": "c", "name": "pay", "arguments": {"to": "bob", "amount": 5}}]}, {"content": "Paid."}`)
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v", err)
	}
	other, _ := spec.Load(payerSpec)
	other.AgentName = "someone-else"
	b, err := New(other, WithTools(durableTools(t, l, true, nil)), WithBaseDir(filepath.Dir(payerSpec)))
	if err != nil {
		t.Fatal(err)
	}
	for _, refused := range []func() error{
		func() error { _, err := b.Resume(ctx, st, res.ID, Approve("c")); return err },
		func() error { _, err := a.Resume(ctx, st, res.ID, Approve("not-a-call")); return err },
	} {
		if err := refused(); !errors.Is(err, ErrNotResumable) && !errors.Is(err, ErrNoSuchCall) {
			t.Fatalf("a resume that should be refused: %v", err)
		}
		if run, _ := st.Get(ctx, res.ID); run.Holder != "" {
			t.Fatalf("after a refused resume the run is held by %s", run.Holder)
		}
	}
	if _, err := a.Resume(ctx, st, res.ID, Approve("c")); err != nil {
		t.Errorf("the resume after a refused one: %v", err)
	}
}

// A run aborted while it waits for approval ends aborted with what it
// did on record in its Result: its turns are served from the log, and
// the waiting call neither runs nor pauses the run again.
func TestAbortWhileWaiting(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `
		{"tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
		{"tool_calls": [{"id": "c2", "name": "pay", "arguments": {"to": "bob", "amount": 5}}]},
		{"content": "Paid."}`)
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v; want it to await approval", err)
	}
	sess, err := a.Resume(ctx, st, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	sess.Abort()
	got, err := sess.Run(ctx)
	if !errors.Is(err, ErrAborted) {
		t.Fatalf("aborted resume: %v; want ErrAborted", err)
	}
	if got.TerminateReason != ReasonAborted || got.Iterations != 2 || len(got.Steps) < 1 || got.Steps[0].Action == nil || got.Steps[0].Action.Tool != "add" {
		t.Errorf("aborted Result: reason %s, %d turns, steps %+v; want the run so far, aborted", got.TerminateReason, got.Iterations, got.Steps)
	}
	if got.TokenUsage.TotalTokens != res.TokenUsage.TotalTokens {
		t.Errorf("aborted Result used %d tokens; the run had used %d", got.TokenUsage.TotalTokens, res.TokenUsage.TotalTokens)
	}
	if sends := l.sends(t); len(sends) != 0 {
		t.Errorf("payments %v; the aborted run paid", sends)
	}
	if run, err := st.Get(ctx, res.ID); err != nil || run.Status != "aborted" {
		t.Errorf("stored run %+v (%v)", run, err)
	}
}

// TestRefusedResumeFreesTheRun: a resume refused for its input (the
// stored snapshot no longer renders with the agent's spec) gives the
// run's lease back at once: the next resume is refused for the same
// reason, not as held by a process that is gone.
func TestRefusedResumeFreesTheRun(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `{"tool_calls": [{"id": "call_1", "name": "pay", "arguments": {"to": "bob", "amount": 5}}]}, {"content": "Paid."}`)
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v", err)
	}
	// The agent as it is now: its prompt needs an input the run never had.
	sp, _ := spec.Load(payerSpec)
	sp.PurposeText, sp.InputKeys = "${task} for ${customer}", []string{"task", "customer"}
	sp.Policy, _ = policy.Parse([]byte(`{"approval": {"tools": ["pay"]}}`))
	b, err := New(sp, WithProvider(&recorder{}, "test"), WithTools(durableTools(t, l, true, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		sess, err := b.Resume(ctx, st, res.ID, Approve("call_1"))
		if err == nil {
			_, err = sess.Run(ctx)
		}
		if err == nil || errors.Is(err, store.ErrHeld) || strings.Contains(err.Error(), "held by") || !strings.Contains(err.Error(), "customer") {
			t.Fatalf("resume %d: %v; want it refused for the missing input, the run free", attempt, err)
		}
	}
	if run, _ := st.Get(ctx, res.ID); run.Holder != "" || run.Status != store.AwaitingApproval {
		t.Errorf("after refused resumes: status %s, holder %q", run.Status, run.Holder)
	}
}

// failOnce is a store whose next Append fails, once.
type failOnce struct {
	store.Store
	fail atomic.Bool
}

func (f *failOnce) Append(ctx context.Context, w store.Write) error {
	if f.fail.CompareAndSwap(true, false) {
		return errors.New("the disk is full")
	}
	return f.Store.Append(ctx, w)
}

// TestResumeThatCannotBeginFreesTheRun: a resume whose session cannot
// begin (its log cannot be taken up: here the store refuses the write)
// gives the lease back, so the next resume goes on at once.
func TestResumeThatCannotBeginFreesTheRun(t *testing.T) {
	ctx := context.Background()
	st := &failOnce{Store: openStore(t, testdb.SQLite(t))}
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `{"tool_calls": [{"id": "call_1", "name": "pay", "arguments": {"to": "bob", "amount": 5}}]}, {"content": "Paid."}`)
	res, err := a.Run(ctx, payerInput, WithStore(st))
	if !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v", err)
	}
	sess, err := a.Resume(ctx, st, res.ID, Approve("call_1"))
	if err != nil {
		t.Fatal(err)
	}
	st.fail.Store(true)
	if _, err := sess.Run(ctx); err == nil || !strings.Contains(err.Error(), "the disk is full") {
		t.Fatalf("the failing resume: %v", err)
	}
	sess, err = a.Resume(ctx, st, res.ID, Approve("call_1"))
	if err != nil {
		t.Fatalf("the next resume: %v; want the run free", err)
	}
	if res, err := sess.Run(ctx); err != nil || !res.Success {
		t.Errorf("the next resume ran: %v", err)
	}
}

// TestWaitingCallsRedacted: a hostile model that puts a secret in the
// arguments of a call held for approval does not get it into the
// Result's waiting calls (arguments or reason), and a private tool's
// arguments wait as a digest.
func TestWaitingCallsRedacted(t *testing.T) {
	ctx := context.Background()
	const secret = "sk-proj-CANARYwaiting00000000000000001"
	for _, private := range []bool{false, true} {
		l := ledger{filepath.Join(t.TempDir(), "ledger")}
		script, err := scripted.Parse("leak", []byte(`{"turns": [{"tool_calls": [{"id": "c1", "name": "pay", "arguments": {"to": "`+secret+`", "amount": 5}}]}, {"content": "ok"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := spec.Load(payerSpec)
		rules := `{"approval": {"tools": ["pay"]}}`
		if private {
			rules = `{"approval": {"tools": ["pay"]}, "private_tools": ["pay"]}`
		}
		sp.Policy, _ = policy.Parse([]byte(rules))
		a, err := New(sp, WithProvider(script.Model(), "scripted"), WithTools(durableTools(t, l, true, nil)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Run(ctx, payerInput)
		if !errors.Is(err, ErrAwaitingApproval) || len(res.Waiting) != 1 {
			t.Fatalf("private %v: %v, waiting %+v", private, err, res.Waiting)
		}
		b, _ := json.Marshal(res.Waiting)
		if strings.Contains(string(b), "CANARYwaiting") {
			t.Errorf("private %v: the waiting call holds the secret: %s", private, b)
		}
		if w := string(res.Waiting[0].Arguments); private && !strings.Contains(w, "private:sha256:") {
			t.Errorf("a private tool's waiting arguments: %s", w)
		}
	}
}
