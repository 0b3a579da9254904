package agent

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/tool"
)

// Drive makes the session's run driven as p says, by an outside engine
// (package temporal): its calls handed out, its id, its driver, the
// results of the calls it handed out, its deadline (package drive).
func Drive(p drive.Plan) RunOption {
	return func(c *runConfig) {
		e := c.more()
		e.dispatch = e.dispatch || p.Dispatch
		if p.Driver != "" {
			e.driver = p.Driver
		}
		if p.RunID != "" {
			e.runID, e.runIDSet = p.RunID, true
		}
		if p.Results != nil {
			e.results = p.Results
		}
		if p.RanThrough != nil {
			e.ranThrough, e.ranSet = *p.RanThrough, true
		}
		if !p.Deadline.IsZero() {
			e.deadline = p.Deadline
		}
	}
}

// checkRunID refuses a run id that would not make a usable key or path.
func checkRunID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w: drive.Plan.RunID: a run id has 1 to 128 characters, not %d", ErrConfig, len(id))
	}
	for _, r := range id {
		if r <= ' ' || r > '~' || r == ':' || r == '/' {
			return fmt.Errorf("%w: drive.Plan.RunID %q: a run id is printable ASCII without spaces, ':' or '/'", ErrConfig, id)
		}
	}
	return nil
}

// dispatched is what a dispatching journal handed out this turn.
type dispatched struct {
	mu    sync.Mutex
	calls []drive.PendingCall
}

// add hands call out and returns the error its handler answers with.
func (d *dispatched) add(ctx context.Context, a *Agent, call *tool.Call) error {
	p := drive.PendingCall{Key: call.Key(), CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
		Turn: call.Turn, Index: call.Index, Idempotency: call.Class(), Deduplicates: call.Deduplicates(ctx),
		Timeout: a.toolTimeout(call.Info)}
	d.mu.Lock()
	d.calls = append(d.calls, p)
	d.mu.Unlock()
	return errCallDispatched
}

// errCallDispatched answers a call handed out; the run stops after the
// turn with the drive.DispatchError that lists them all.
var errCallDispatched = &drive.DispatchError{}

// dispatchEnd is the error a turn that handed calls out ends the run
// with, nil when it handed none out.
func (r *run) dispatchEnd(paused error) error {
	j := r.link.journal
	if j == nil || j.out == nil {
		return nil
	}
	j.out.mu.Lock()
	defer j.out.mu.Unlock()
	if len(j.out.calls) == 0 {
		return nil
	}
	calls := append([]drive.PendingCall(nil), j.out.calls...)
	j.out.calls = j.out.calls[:0]
	slices.SortFunc(calls, func(a, b drive.PendingCall) int { return a.Index - b.Index }) // parallel calls hand out in any order
	return &drive.DispatchError{Calls: calls, Paused: paused}
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
func (a *Agent) Exec(ctx context.Context, run *tool.Run, p drive.PendingCall, progress tool.ProgressReporter) runlog.ToolResult {
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
		return journal.NewToolResult(call, tool.Output{}, d, start)
	}
	call.Tool, call.Info = b.tool, b.info
	if got := call.Key(); got != p.Key {
		d := &tool.ErrorDetails{Type: "invalid_call", Message: fmt.Sprintf("the call's key is %s, not %s: run %q, turn %d, index %d",
			got, p.Key, run.RunID, p.Turn, p.Index), Recoverable: false}
		return journal.NewToolResult(call, tool.Output{}, d, start)
	}
	var out tool.Output
	var err error
	if o := a.execSpan(ctx, run); o != nil {
		out, err = a.toolSpan(ctx, o, call, b.inner)
	} else {
		out, err = b.inner(ctx, call)
	}
	return journal.NewToolResult(call, out, err, start)
}
