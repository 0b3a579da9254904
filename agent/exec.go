package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// callResult is what one tool call produced.
type callResult struct {
	out      json.RawMessage
	err      error
	attempts int
	start    time.Time
	dur      time.Duration
	cached   bool        // answered from the run's cache of valid results
	hints    *tool.Hints // what the tool said about its result
}

// cacheEntry is a result a tool declared valid for a while.
type cacheEntry struct {
	out     json.RawMessage
	hints   *tool.Hints
	expires time.Time
}

// runTools runs the tool calls of one turn: one inline, several in
// parallel (at most max_parallel_tools at a time). Results enter the
// transcript and the trace in the order the model asked for them.
func (r *run) runTools(resp *llm.Response) {
	if len(r.a.spec.Handoffs) > 0 {
		r.runWithHandoff(resp)
		return
	}
	r.runBatch(resp)
}

// runBatch runs a turn's tool calls and appends their results.
func (r *run) runBatch(resp *llm.Response) {
	calls := resp.ToolCalls
	if len(calls) == 1 {
		var res callResult
		r.exec(&calls[0], &res)
		r.appendToolMessage(&calls[0], r.record(resp.Content, &calls[0], &res))
		return
	}
	results := r.runParallel(calls)
	for i := range calls {
		r.appendToolMessage(&calls[i], r.record(resp.Content, &calls[i], &results[i]))
	}
}

// runWithHandoff runs a batch that may hand the conversation off: the
// transfer call is answered in the transcript, the other calls run, and
// then the next turn belongs to the target agent.
func (r *run) runWithHandoff(resp *llm.Response) {
	var rest []llm.ToolCall
	var transfer *llm.ToolCall
	for i := range resp.ToolCalls {
		if b := r.a.tools[resp.ToolCalls[i].Name]; b != nil && b.handoff != nil && transfer == nil {
			transfer = &resp.ToolCalls[i]
			continue
		}
		rest = append(rest, resp.ToolCalls[i])
	}
	if len(rest) > 0 {
		r.runBatch(&llm.Response{Content: resp.Content, ToolCalls: rest}) // a second transfer fails as a tool
	}
	if transfer == nil {
		return
	}
	b := r.a.tools[transfer.Name]
	var res callResult
	active := r.callStarted(transfer)
	res.start = time.Now()
	ok, err := r.takeHandoff([]llm.ToolCall{*transfer})
	res.dur = time.Since(res.start)
	if err != nil || !ok {
		res.err = &tool.ErrorDetails{Type: "handoff_failed", Message: fmt.Sprint(err), Recoverable: false}
	} else {
		res.out = json.RawMessage(`{"transferred_to":"` + b.handoff.name + `"}`)
	}
	if active {
		r.callEnded(transfer, &res)
	}
	r.appendToolMessage(transfer, r.record(resp.Content, transfer, &res))
}

func (r *run) appendToolMessage(call *llm.ToolCall, obs string) {
	r.st.Messages = append(r.st.Messages, llm.Message{Role: llm.RoleTool, Content: obs, ToolCallID: call.ID, Name: call.Name})
}

func (r *run) runParallel(calls []llm.ToolCall) []callResult {
	results := make([]callResult, len(calls))
	sem := make(chan struct{}, max(r.a.limits.MaxParallelTools, 1))
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-r.ctx.Done():
				// exec sees the ended context and records a cancelled
				// call, with its start and end events.
			}
			r.exec(&calls[i], &results[i])
		}()
	}
	wg.Wait()
	return results
}

// exec runs one call; it never panics (tool.Invoke recovers) and always
// emits one start and one end event.
func (r *run) exec(call *llm.ToolCall, res *callResult) {
	active := r.callStarted(call)
	res.start = time.Now()
	b := r.a.tools[call.Name]
	switch {
	case r.ctx.Err() != nil:
		res.err = &tool.ErrorDetails{Type: "cancelled", Message: "the run ended before the call started", Recoverable: false}
	case b == nil:
		res.err = &tool.ErrorDetails{Type: "unknown_tool", Recoverable: true,
			Message: fmt.Sprintf("there is no tool %q; available tools: %s", call.Name, r.toolNames())}
	case r.fromCache(call, res):
	default:
		res.out, res.attempts, res.err = tool.Invoke(r.ctx, b.tool, call.Arguments, tool.CallOptions{
			Timeout: b.timeout, Attempts: b.attempts,
			Backoff: time.Duration(r.a.retry.InitialBackoffMS) * time.Millisecond,
		})
		if res.err == nil {
			r.keepHints(call, res)
		}
	}
	res.dur = time.Since(res.start)
	if active {
		r.callEnded(call, res)
	}
}

// callStarted emits tool_call_start, when anyone listens, and reports
// whether anyone does.
func (r *run) callStarted(call *llm.ToolCall) bool {
	if !r.s.bus.Active() {
		return false
	}
	r.emit(event.Event{Type: event.ToolCallStart, Tool: &event.ToolCall{ID: call.ID, Name: call.Name, Arguments: call.Arguments}})
	return true
}

// callEnded emits tool_call_end for a finished call.
func (r *run) callEnded(call *llm.ToolCall, res *callResult) {
	tc := &event.ToolCall{ID: call.ID, Name: call.Name, Arguments: call.Arguments, Status: "success", DurationMS: ms(res.dur),
		Attempts: res.attempts, Output: res.out}
	if res.err != nil {
		tc.Status, tc.Error = "error", res.err.Error()
	}
	r.emit(event.Event{Type: event.ToolCallEnd, Tool: tc})
}

func (r *run) toolNames() string {
	names := make([]string, 0, len(r.a.tools))
	for n := range r.a.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprint(names)
}

// fromCache answers a call from the run's cache when an earlier call with
// the same arguments is still valid.
func (r *run) fromCache(call *llm.ToolCall, res *callResult) bool {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache == nil {
		return false
	}
	e, ok := r.cache[call.Name+"\x00"+string(call.Arguments)]
	if !ok || time.Now().After(e.expires) {
		return false
	}
	res.out, res.hints, res.cached = e.out, e.hints, true
	return true
}

// keepHints reads a result's hints and caches it for its validity period.
func (r *run) keepHints(call *llm.ToolCall, res *callResult) {
	h := tool.HintsOf(res.out)
	if h == nil {
		return
	}
	res.hints = h
	if h.ValidityPeriod <= 0 {
		return
	}
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache == nil {
		r.cache = map[string]cacheEntry{}
	}
	r.cache[call.Name+"\x00"+string(call.Arguments)] = cacheEntry{out: res.out, hints: h, expires: time.Now().Add(time.Duration(h.ValidityPeriod))}
}

// record adds a finished call to the trace and returns its observation.
func (r *run) record(thought string, call *llm.ToolCall, res *callResult) string {
	st := r.st
	st.ToolCalls++
	var obs string
	// Actions are allocated in chunks: a step points into r.actions, whose
	// old arrays stay valid (and unchanged) when it grows.
	r.actions = append(r.actions, Action{Tool: call.Name, CallID: call.ID, Input: call.Arguments, DurationMS: ms(res.dur),
		Attempts: res.attempts, Cached: res.cached})
	act := &r.actions[len(r.actions)-1]
	if res.err != nil {
		st.ToolErrors++
		obs = errorObservation(res.err)
		act.Error = res.err.Error()
	} else {
		obs = string(res.out)
		act.Output = res.out
	}
	if _, known := r.a.tools[call.Name]; known {
		st.ToolLatencyMS[call.Name] += act.DurationMS
		if !slices.Contains(st.ToolsUsed, call.Name) {
			st.ToolsUsed = append(st.ToolsUsed, call.Name)
		}
	}
	if res.hints != nil {
		act.Hints = res.hints
		r.noteHints(res.hints)
	}
	st.Steps = append(st.Steps, Step{Step: len(st.Steps) + 1, Turn: st.Turn, Thought: thought, Action: act,
		Observation: obs, Timestamp: Timestamp{res.start}})
	return obs
}

// errorObservation is what the model sees of a failed call: the
// StandardToolResult of the failure, as JSON.
func errorObservation(err error) string {
	var d *tool.ErrorDetails
	var ae *tool.ArgumentError
	if errors.As(err, &ae) {
		d = ae.Details()
	} else {
		d = tool.DetailsFrom(err, true)
		if d.Type == "panic" {
			d = &tool.ErrorDetails{Type: d.Type, Message: d.Message, Recoverable: d.Recoverable} // no stack for the model
		}
	}
	b, mErr := json.Marshal(tool.Failure(d, ""))
	if mErr != nil {
		return `{"status":"error","error":{"type":"tool_error","message":` + fmt.Sprintf("%q", err.Error()) + `,"recoverable":false}}`
	}
	return string(b)
}
