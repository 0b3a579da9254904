package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/tool"
)

// PendingCall is a tool call a run handed out (Dispatch): what the
// executor needs to run it with Exec.
type PendingCall struct {
	// Key is the call's idempotency key, RUN_ID:TURN:INDEX.
	Key       string          `json:"key"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Turn      int             `json:"turn"`
	Index     int             `json:"index"`
	// Idempotency is the call's class: a non-idempotent call must run at
	// most once, unless Deduplicates says its tool drops a repeat of the
	// same key.
	Idempotency  tool.Idempotency `json:"idempotency"`
	Deduplicates bool             `json:"deduplicates,omitempty"`
	// Timeout bounds one attempt of the call (0: none); Exec retries by
	// the tool's retry policy.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// DispatchError is the error of a run that stopped with calls handed
// out (ErrDispatched).
type DispatchError struct {
	// Calls are the calls to run, in the turn's order.
	Calls []PendingCall
	// Waiting are calls of the same turn that wait for a person's
	// approval: decide them (Approve, Deny) when resuming.
	Waiting []WaitingCall
}

// WaitingCall is a call that waits for a person's approval.
type WaitingCall struct {
	Key    string `json:"key"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Rule is the policy rule that holds it back, empty for a call of
	// unknown outcome (it may have taken effect before the run stopped).
	Rule string `json:"rule,omitempty"`
}

func (e *DispatchError) Error() string {
	keys := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		keys[i] = c.Key + " (" + c.Tool + ")"
	}
	return fmt.Sprintf("%s: %s", ErrDispatched, strings.Join(keys, ", "))
}

// Is makes errors.Is(err, ErrDispatched) true.
func (e *DispatchError) Is(target error) bool { return target == ErrDispatched }

// Dispatch makes the session hand out the tool calls it would run instead
// of running them: each call that passed the policy (and, when
// non-idempotent, had its intent committed) is listed, and the run stops
// after its turn with a *DispatchError. The executor runs each call
// (Exec) and a Resume given WithResults goes on from there: that is how a
// durable-execution engine runs each call as a task of its own. Calls a
// run answers itself (from its cache, a handoff, a sub-agent, the calls
// of an agent it was handed to) are not handed out. A dispatching
// session needs a store.
func Dispatch() RunOption { return func(c *runConfig) { c.more().dispatch = true } }

// WithResults gives a resumed run the results of the calls it handed out
// (Dispatch), by idempotency key: the run records each as the call's
// result, as if it had run the call itself. A result for a call the log
// already holds is ignored.
func WithResults(results map[string]runlog.ToolResult) RunOption {
	return func(c *runConfig) { c.more().results = results }
}

// RanThrough tells a resumed dispatching run (Dispatch) that its
// executor was handed the calls of turns up to turn, and no later one: a
// call of a later turn whose intent is on record was handed out by a
// planning attempt that died before its hand-out arrived, so it never
// ran, and it is handed out again rather than paused on as a call of
// unknown outcome.
func RanThrough(turn int) RunOption {
	return func(c *runConfig) { e := c.more(); e.ranThrough, e.ranSet = turn, true }
}

// DrivenBy makes the session's run driven by driver: something that
// moves between processes, such as a workflow ("temporal:NAMESPACE/ID").
// The run's lease is held by a holder named after driver, a Resume of
// the same driver takes it over from an earlier holder of its (whose
// writes are then refused), and the run's start record names the
// driver: a Resume of another driver (or of none) is refused, so that
// the run is decided where it is driven.
func DrivenBy(driver string) RunOption { return func(c *runConfig) { c.more().driver = driver } }

// WithRunID gives the session's run the id id instead of a new one: a
// host that must name a run before it starts (a workflow's id) says
// which. The store refuses an id already taken.
func WithRunID(id string) RunOption {
	return func(c *runConfig) { e := c.more(); e.runID, e.runIDSet = id, true }
}

// WithDeadline ends the run with ErrTimeout at t, when that comes before
// its own timeout would: a host that counts a run's time across processes
// (a run on Temporal, resumed each turn) gives the deadline its time
// left makes. A resumed session whose deadline passed goes through its
// log, then ends timed out.
func WithDeadline(t time.Time) RunOption { return func(c *runConfig) { c.more().deadline = t } }

// checkRunID refuses a run id that would not make a usable key or path.
func checkRunID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w: WithRunID: a run id has 1 to 128 characters, not %d", ErrConfig, len(id))
	}
	for _, r := range id {
		if r <= ' ' || r > '~' || r == ':' || r == '/' {
			return fmt.Errorf("%w: WithRunID %q: a run id is printable ASCII without spaces, ':' or '/'", ErrConfig, id)
		}
	}
	return nil
}

// dispatched is what a dispatching journal handed out this turn.
type dispatched struct {
	mu    sync.Mutex
	calls []PendingCall
}

// add hands call out and returns the error its handler answers with.
func (d *dispatched) add(ctx context.Context, a *Agent, call *tool.Call) error {
	p := PendingCall{Key: call.Key(), CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
		Turn: call.Turn, Index: call.Index, Idempotency: call.Class(), Deduplicates: call.Deduplicates(ctx),
		Timeout: a.toolTimeout(call.Info)}
	d.mu.Lock()
	d.calls = append(d.calls, p)
	d.mu.Unlock()
	return errCallDispatched
}

// errCallDispatched answers a call handed out; the run stops after the
// turn with the DispatchError that lists them all.
var errCallDispatched = &DispatchError{}

// dispatchEnd is the error a turn that handed calls out ends the run
// with, nil when it handed none out.
func (r *run) dispatchEnd(waiting []WaitingCall) error {
	j := r.link.journal
	if j == nil || j.out == nil {
		return nil
	}
	j.out.mu.Lock()
	defer j.out.mu.Unlock()
	if len(j.out.calls) == 0 {
		return nil
	}
	calls := append([]PendingCall(nil), j.out.calls...)
	j.out.calls = j.out.calls[:0]
	slices.SortFunc(calls, func(a, b PendingCall) int { return a.Index - b.Index }) // parallel calls hand out in any order
	return &DispatchError{Calls: calls, Waiting: waiting}
}

// suppliedTurn is the last turn of the results WithResults gives, 0
// without any: the turn a dispatching run stopped after.
func suppliedTurn(results map[string]runlog.ToolResult) int {
	turn := 0
	for key := range results {
		i := strings.LastIndexByte(key, ':')
		if i < 0 {
			continue
		}
		j := strings.LastIndexByte(key[:i], ':')
		if n, err := strconv.Atoi(key[j+1 : i]); err == nil && n > turn {
			turn = n
		}
	}
	return turn
}

// Exec runs one call a run handed out (Dispatch) through the part of the
// agent's tool chain that runs a call: retries by the tool's policy, a
// timeout per attempt, panic recovery and truncation. run is what the
// tool sees of the run (its ids, user and metadata); progress receives
// what the tool reports (nil drops it). The result is what WithResults
// takes: a failed call is a result with its error, never a Go error.
func (a *Agent) Exec(ctx context.Context, run *tool.Run, p PendingCall, progress tool.ProgressReporter) runlog.ToolResult {
	start := time.Now()
	if run == nil {
		run = &tool.Run{} // the key check below refuses the call
	}
	b := a.table().byName[p.Tool]
	call := &tool.Call{ID: p.CallID, Name: p.Tool, Arguments: p.Arguments, Turn: p.Turn, Index: p.Index,
		Started: start, Time: start, Run: run, Budget: tool.Budget{Tokens: tool.Unlimited, CostUSD: tool.Unlimited, ToolCalls: tool.Unlimited},
		Reporter: progress}
	if b == nil {
		d := &tool.ErrorDetails{Type: "unknown_tool", Message: fmt.Sprintf("the agent has no tool %q", p.Tool), Recoverable: false}
		return runlog.NewToolResult(call, tool.Output{}, d, start)
	}
	call.Tool, call.Info = b.tool, b.info
	if got := call.Key(); got != p.Key {
		d := &tool.ErrorDetails{Type: "invalid_call", Message: fmt.Sprintf("the call's key is %s, not %s: run %q, turn %d, index %d",
			got, p.Key, run.RunID, p.Turn, p.Index), Recoverable: false}
		return runlog.NewToolResult(call, tool.Output{}, d, start)
	}
	var out tool.Output
	var err error
	if o := a.execSpan(ctx, run); o != nil {
		out, err = a.toolSpan(ctx, o, call, b.inner)
	} else {
		out, err = b.inner(ctx, call)
	}
	return runlog.NewToolResult(call, out, err, start)
}
