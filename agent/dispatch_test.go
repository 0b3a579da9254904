package agent

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// driveDispatched runs the stored run runID as a workflow engine would:
// each stop hands calls out, each call runs on its own (Exec, with an
// agent built from the log), and a resume given their results goes on.
// It returns the final Result and how many times the run stopped.
func driveDispatched(t *testing.T, st store.Store, reg *tool.Registry, driver, runID string, sess *Session) (*Result, int) {
	t.Helper()
	ctx := context.Background()
	stops := 0
	for {
		res, err := sess.Run(ctx)
		var de *drive.DispatchError
		if !errors.As(err, &de) {
			return res, stops
		}
		stops++
		if stops > 10 {
			t.Fatal("the run never ends")
		}
		run, gerr := st.Get(ctx, runID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		if run.Status != store.Running || !strings.HasPrefix(run.Holder, driver+"/") {
			t.Errorf("between its tasks the run is %s held by %q; want running, held by %s", run.Status, run.Holder, driver)
		}
		exec := storedAgent(t, st, runID, WithTools(reg))
		info := &tool.Run{RunID: runID}
		results := map[string]runlog.ToolResult{}
		for _, c := range de.Calls {
			results[c.Key] = exec.Exec(ctx, info, c, nil)
		}
		exec.Close()
		a := storedAgent(t, st, runID, WithTools(reg))
		t.Cleanup(func() { a.Close() })
		if sess, err = a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver, Results: results})); err != nil {
			t.Fatal(err)
		}
	}
}

// A run that hands its calls out and is resumed with their results ends
// as the same run made in one go: the same Result, the same events in
// the same order, each effect once, the calls run with their own keys.
func TestDispatch(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, b.dsn(t))
			local := ledger{filepath.Join(t.TempDir(), "local")}
			want, err := payerAgent(t, durableTools(t, local, false, nil)).Run(ctx, payerInput, WithStore(st))
			if err != nil {
				t.Fatal(err)
			}

			l := ledger{filepath.Join(t.TempDir(), "dispatched")}
			reg := durableTools(t, l, false, nil)
			const driver, runID = "test:wf-1", "run_dispatched_1"
			sess, err := payerAgent(t, reg).NewSession(payerInput, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID}))
			if err != nil {
				t.Fatal(err)
			}
			got, stops := driveDispatched(t, st, reg, driver, runID, sess)
			if stops != 2 {
				t.Errorf("the run stopped %d times to hand calls out; want 2 (one a turn with calls)", stops)
			}
			if got.ID != runID {
				t.Errorf("run id %q, want %q", got.ID, runID)
			}
			if g, w := comparable(t, got), comparable(t, want); g != w {
				t.Errorf("dispatched Result differs from the local one:\n%s\nwant:\n%s", g, w)
			}
			if sends := l.sends(t); !slices.Equal(sends, []string{runID + ":2:0"}) {
				t.Errorf("the payment was sent with keys %v; want once, with %s:2:0", sends, runID)
			}
			run, err := st.Get(ctx, runID)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != store.Completed || run.Holder != "" {
				t.Errorf("ended run is %s held by %q", run.Status, run.Holder)
			}
			if g, w := eventTypes(t, st, runID), eventTypes(t, st, want.ID); !slices.Equal(g, w) {
				t.Errorf("events of the dispatched run:\n%v\nwant those of the local run:\n%v", g, w)
			}
		})
	}
}

// eventTypes are the types of the events a run's log holds, as trace
// shows them, with each tool call's id.
func eventTypes(t *testing.T, st store.Store, runID string) []string {
	t.Helper()
	l, err := runlog.Read(context.Background(), st, runID)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := l.Events()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		s := string(e.Type)
		if e.Tool != nil {
			s += "(" + e.Tool.Name + ")"
		}
		if e.Type == event.ToolCallEnd || e.Type == event.ToolCallStart || e.Type == event.TurnStart || e.Type == event.TurnEnd {
			s += "@" + string(rune('0'+e.Turn))
		}
		out = append(out, s)
	}
	// Calls of one turn run in parallel, their events in any order: each
	// turn's are compared sorted.
	typ := func(s string) bool { return strings.HasPrefix(s, "tool_call_") }
	for i := 0; i < len(out); {
		j := i + 1
		for typ(out[i]) && j < len(out) && typ(out[j]) {
			j++
		}
		slices.Sort(out[i:j])
		i = j
	}
	return out
}

// A run a driver drives is resumed by that driver only: a person's
// resume, or another driver's, is refused, and a second holder of the
// same driver fences the first one's writes off.
func TestDispatchDriver(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, backends[0].dsn(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	reg := durableTools(t, l, false, nil)
	const driver, runID = "test:wf-2", "run_driven_2"
	sess, err := payerAgent(t, reg).NewSession(payerInput, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Run(ctx); !errors.Is(err, drive.ErrDispatched) {
		t.Fatalf("first turn: %v; want drive.ErrDispatched", err)
	}
	a := storedAgent(t, st, runID, WithTools(reg))
	defer a.Close()
	for name, opts := range map[string][]RunOption{
		"no driver":      nil,
		"another driver": {Drive(drive.Plan{Driver: "test:wf-3"})},
		"a prefix of it": {Drive(drive.Plan{Driver: "test:wf"})},
	} {
		if _, err := a.Resume(ctx, st, runID, opts...); !errors.Is(err, ErrNotResumable) {
			t.Errorf("%s: resume = %v; want ErrNotResumable", name, err)
		}
	}
	first, err := a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver}))
	if err != nil {
		t.Fatal(err)
	}
	// A second task of the driver takes the run over (the first one timed
	// out, as far as the engine knows): the first may write no more.
	second, err := a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver}))
	if err != nil {
		t.Fatalf("the driver's second holder: %v", err)
	}
	_ = second
	if _, err := first.Run(ctx); !errors.Is(err, ErrStore) && !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the fenced-off holder ran on: %v; want ErrStore (lease lost)", err)
	}
	if sends := l.sends(t); len(sends) != 0 {
		t.Errorf("tools ran in the dispatching session: %v", sends)
	}
	if _, err := payerAgent(t, reg).NewSession(payerInput, Drive(drive.Plan{Dispatch: true})); !errors.Is(err, ErrConfig) {
		t.Errorf("Dispatch without a store: %v; want ErrConfig", err)
	}
	for _, id := range []string{"a:b", "a/b", "a b", strings.Repeat("x", 129)} {
		if _, err := payerAgent(t, reg).NewSession(payerInput, Drive(drive.Plan{RunID: id})); !errors.Is(err, ErrConfig) {
			t.Errorf("Drive(drive.Plan{RunID: %q}): %v; want ErrConfig", id, err)
		}
	}
}

// A Plan's Deadline bounds a run by a deadline a host counts across
// processes: passed, a new session ends at once and a resumed one goes
// through its log first; its time left tightens the run's timeout.
func TestDeadline(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, backends[0].dsn(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	reg := durableTools(t, l, false, nil)
	res, err := payerAgent(t, reg).Run(ctx, payerInput, WithStore(st), Drive(drive.Plan{Deadline: time.Now().Add(-time.Second)}))
	if !errors.Is(err, ErrTimeout) || res.Iterations > 1 {
		t.Errorf("a deadline passed: %v after %d turns; want ErrTimeout at once", err, res.Iterations)
	}
	if res, err := payerAgent(t, reg).Run(ctx, payerInput, Drive(drive.Plan{Deadline: time.Now().Add(time.Hour)})); err != nil || !res.Success {
		t.Errorf("a deadline far off: %v", err)
	}

	const driver, runID = "test:wf-deadline", "run_deadline"
	sess, err := payerAgent(t, reg).NewSession(payerInput, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Run(ctx); !errors.Is(err, drive.ErrDispatched) {
		t.Fatal(err)
	}
	a := storedAgent(t, st, runID, WithTools(reg))
	defer a.Close()
	sess, err = a.Resume(ctx, st, runID, Drive(drive.Plan{Driver: driver, Deadline: time.Now().Add(-time.Millisecond)}))
	if err != nil {
		t.Fatal(err)
	}
	res, err = sess.Run(ctx)
	if !errors.Is(err, ErrTimeout) || res.TerminateReason != ReasonTimeout || res.Iterations != 1 || res.TokenUsage.TotalTokens != 60 {
		t.Errorf("a resumed run out of time: %v, reason %s, %d turns, %d tokens; want timed out with its first turn on record",
			err, res.TerminateReason, res.Iterations, res.TokenUsage.TotalTokens)
	}
	if sends := l.sends(t); slices.ContainsFunc(sends, func(k string) bool { return strings.HasPrefix(k, runID) }) {
		t.Errorf("the run out of time paid: %v", sends)
	}
}

// A planning attempt that died after it handed calls out, before the
// hand-out reached the executor, is run again with the same input: the
// calls of the turn it planned never ran, and are handed out again, not
// paused on as of unknown outcome (RanThrough). A call the executor was
// handed and lost is of unknown outcome: the run pauses on it.
func TestDispatchRetriedAttempt(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, backends[0].dsn(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	reg := durableTools(t, l, false, nil)
	const driver, runID = "test:wf-retried", "run_retried"
	sess, err := payerAgent(t, reg).NewSession(payerInput, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID, RanThrough: ranThrough(0)}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Run(ctx)
	var de *drive.DispatchError
	if !errors.As(err, &de) || len(de.Calls) != 1 {
		t.Fatalf("turn 1: %v", err)
	}
	a := storedAgent(t, st, runID, WithTools(reg))
	defer a.Close()
	results := map[string]runlog.ToolResult{de.Calls[0].Key: a.Exec(ctx, &tool.Run{RunID: runID}, de.Calls[0], nil)}
	for attempt := 1; attempt <= 2; attempt++ { // the first attempt's hand-out is lost
		s, err := a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver, Results: results, RanThrough: ranThrough(1)}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Run(ctx)
		if !errors.As(err, &de) || len(de.Calls) != 2 || de.Calls[0].Tool != "pay" || de.Paused != nil {
			t.Fatalf("attempt %d of turn 2: %v; want pay and add handed out", attempt, err)
		}
	}
	// The executor ran turn 2's calls, and lost pay's: it is not sent again.
	s, err := a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver, RanThrough: ranThrough(2), Results: map[string]runlog.ToolResult{de.Calls[1].Key: a.Exec(ctx, &tool.Run{RunID: runID}, de.Calls[1], nil)}}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx)
	if !errors.Is(err, ErrAwaitingApproval) || res.TerminateReason != ReasonAwaitingApproval {
		t.Errorf("a lost non-idempotent call: %v (%s); want the run to wait for a person", err, res.TerminateReason)
	}
	if sends := l.sends(t); len(sends) != 0 {
		t.Errorf("payments %v; none was made", sends)
	}
}

// A turn that hands a call out while another waits for a person: the
// call runs, and the run then pauses as a local run does, its Result
// that of a pause, each call's events once.
func TestDispatchMixedTurn(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, backends[0].dsn(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `
		{"tool_calls": [{"id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}, {"id": "c2", "name": "pay", "arguments": {"to": "bob", "amount": 5}}]},
		{"content": "Paid."}`)
	const driver, runID = "test:wf-mixed", "run_mixed"
	sess, err := a.NewSession(payerInput, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID, RanThrough: ranThrough(0)}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.Run(ctx)
	var de *drive.DispatchError
	var ae *ApprovalError
	if !errors.As(err, &de) || len(de.Calls) != 1 || de.Calls[0].Tool != "add" || !errors.As(err, &ae) || ae.Tool != "pay" {
		t.Fatalf("the mixed turn: %v", err)
	}
	if len(res.Waiting) != 1 || res.Waiting[0].Tool != "pay" || res.Waiting[0].Rule == "" || !strings.Contains(string(res.Waiting[0].Arguments), `"bob"`) {
		t.Fatalf("the mixed turn's Result waits on %+v", res.Waiting)
	}
	results := map[string]runlog.ToolResult{de.Calls[0].Key: a.Exec(ctx, &tool.Run{RunID: runID}, de.Calls[0], nil)}
	s, err := a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver, Results: results, RanThrough: ranThrough(1)}))
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.Run(ctx)
	if !errors.Is(err, ErrAwaitingApproval) || res.TerminateReason != ReasonAwaitingApproval || res.Error == nil || res.Error.Code != CodeAwaitingApproval {
		t.Fatalf("after the handed-out call: %v, %s; want a pause for approval", err, res.TerminateReason)
	}
	if run, _ := st.Get(ctx, runID); run.Status != store.AwaitingApproval {
		t.Errorf("stored status %s", run.Status)
	}
	s, err = a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver}), Approve(runID+":1:1"), Drive(drive.Plan{RanThrough: ranThrough(1)}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(ctx)
	if !errors.As(err, &de) || len(de.Calls) != 1 || de.Calls[0].Tool != "pay" {
		t.Fatalf("approved: %v; want pay handed out", err)
	}
	results = map[string]runlog.ToolResult{de.Calls[0].Key: a.Exec(ctx, &tool.Run{RunID: runID}, de.Calls[0], nil)}
	s, err = a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver, Results: results, RanThrough: ranThrough(1)}))
	if err != nil {
		t.Fatal(err)
	}
	if res, err = s.Run(ctx); err != nil || res.Result != "Paid." {
		t.Fatalf("end: %v %v", err, res.Result)
	}
	counts := map[string]int{}
	for _, e := range eventTypes(t, st, runID) {
		counts[e]++
	}
	if counts["tool_call_end(pay)@1"] != 1 || counts["tool_call_start(pay)@1"] != 1 || counts["tool_call_end(add)@1"] != 1 || counts["run_end"] != 1 {
		t.Errorf("events of the run: %v; want each call's start and end once", counts)
	}
	if sends := l.sends(t); !slices.Equal(sends, []string{runID + ":1:1"}) {
		t.Errorf("payments %v", sends)
	}
}

// A run handed to another agent (a handoff) runs that agent's calls in
// the planning step: the executor builds the run's first agent, whose
// tools they are not.
func TestDispatchHandoff(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, backends[0].dsn(t))
	reg := testTools(t)
	dir := spec.Dir{Path: "testdata/agents"}
	a, err := FromDir(dir.Path, "triage", WithTools(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const driver, runID = "test:wf-handoff", "run_handoff"
	sess, err := a.NewSession(map[string]any{"question": "Is invoice 42 paid?"}, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID}))
	if err != nil {
		t.Fatal(err)
	}
	var res *Result
	for stops := 0; ; stops++ {
		res, err = sess.Run(ctx)
		var de *drive.DispatchError
		if !errors.As(err, &de) {
			break
		}
		if stops > 6 {
			t.Fatal("the run never ends")
		}
		exec := storedAgent(t, st, runID, WithTools(reg), WithAgents(dir))
		results := map[string]runlog.ToolResult{}
		for _, c := range de.Calls {
			results[c.Key] = exec.Exec(ctx, &tool.Run{RunID: runID}, c, nil)
		}
		exec.Close()
		b := storedAgent(t, st, runID, WithTools(reg), WithAgents(dir))
		defer b.Close()
		if sess, err = b.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver, Results: results})); err != nil {
			t.Fatal(err)
		}
	}
	if err != nil || !res.Success || len(res.Handoffs) == 0 {
		t.Fatalf("handed-off run: %v, handoffs %v", err, res.Handoffs)
	}
	for _, s := range res.Steps {
		if s.Action != nil && strings.Contains(s.Observation, "unknown_tool") {
			t.Errorf("step %s: %s", s.Action.Tool, s.Observation)
		}
	}
}

// A driven run's log sealed with a key still names its driver to a
// reader with the key (runlog.Driver), so that it is decided where it
// is driven; a reader without the key learns nothing from it.
func TestDriverOfSealedRun(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, backends[0].dsn(t))
	key := []byte("0123456789abcdef0123456789abcdef")
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := payerAgent(t, durableTools(t, l, false, nil), WithEncryptionKey(key))
	const driver, runID = "test:wf-sealed", "run_sealed"
	sess, err := a.NewSession(payerInput, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Run(ctx); !errors.Is(err, drive.ErrDispatched) {
		t.Fatal(err)
	}
	seal, err := runlog.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := runlog.Driver(ctx, st, runID, runlog.Sealed(seal)); got != driver {
		t.Errorf("driver with the key: %q; want %q", got, driver)
	}
	if got := runlog.Driver(ctx, st, runID); got != "" {
		t.Errorf("driver without the key: %q; want none", got)
	}
}

// A driven run that waits for a person has no lease held: only its
// driver may resume it, not a person's resume or another driver's.
func TestDriverOfWaitingRun(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, backends[0].dsn(t))
	l := ledger{filepath.Join(t.TempDir(), "ledger")}
	a := approvalAgent(t, l, `{"tool_calls": [{"id": "c1", "name": "pay", "arguments": {"to": "bob", "amount": 5}}]}, {"content": "Paid."}`)
	const driver, runID = "test:wf-waiting", "run_driven_waiting"
	sess, err := a.NewSession(payerInput, WithStore(st), Drive(drive.Plan{Dispatch: true, Driver: driver, RunID: runID}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Run(ctx); !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("run: %v; want it to wait", err)
	}
	if run, _ := st.Get(ctx, runID); run.Holder != "" || run.Status != store.AwaitingApproval {
		t.Fatalf("the waiting run: %+v; want it released, awaiting approval", run)
	}
	for name, opts := range map[string][]RunOption{
		"a person's resume": {Approve(runID + ":1:0")},
		"another driver":    {Drive(drive.Plan{Driver: "test:wf-other"}), Approve(runID + ":1:0")},
	} {
		if _, err := a.Resume(ctx, st, runID, opts...); !errors.Is(err, ErrNotResumable) {
			t.Errorf("%s: %v; want ErrNotResumable", name, err)
		}
	}
	if sends := l.sends(t); len(sends) != 0 {
		t.Errorf("payments %v", sends)
	}
	if _, err := a.Resume(ctx, st, runID, Drive(drive.Plan{Dispatch: true, Driver: driver}), Approve(runID+":1:0")); err != nil {
		t.Errorf("its driver's resume: %v", err)
	}
}

// ranThrough is a Plan's RanThrough of turn.
func ranThrough(turn int) *int { return &turn }
