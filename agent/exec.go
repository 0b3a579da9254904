package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// cacheEntry is a result a tool declared valid for a while.
type cacheEntry struct {
	out     json.RawMessage
	hints   *tool.Hints
	expires time.Time
}

// runTools runs the tool calls of one turn through their handler chains:
// one inline, several in parallel (at most max_parallel_tools at a time)
// or one after another when the planner says so. Results enter the trace
// and the transcript in the order they were asked for; a handoff call
// hands the next turn to another agent.
func (r *run) runTools(d *Decision) {
	calls := d.Calls
	results := r.results[:0]
	if cap(results) < len(calls) {
		results = make([]ToolResult, len(calls))
	}
	results = results[:len(calls)]
	clear(results)
	var transfer = -1
	for i := range calls {
		if b := r.a.table().byName[calls[i].Name]; b != nil && b.handoff != nil && transfer < 0 {
			transfer = i
		}
	}
	base := r.st.ToolCalls
	sched := r.schedule(calls)
	switch {
	case sched != nil:
		for _, wave := range sched.waves {
			if len(wave) == 1 || d.Sequential || r.fixed {
				for _, i := range wave {
					r.exec(i, base, &calls[i], &results[i], i == transfer, false)
				}
				continue
			}
			r.runParallel(calls, results, base, transfer, wave)
		}
	case len(calls) == 1 || d.Sequential || r.fixed: // a fixed clock: the events in call order
		for i := range calls {
			// act checked the run's context just before the first call.
			r.exec(i, base, &calls[i], &results[i], i == transfer, i == 0)
		}
	default:
		r.runParallel(calls, results, base, transfer, nil)
	}
	record := func(i int) {
		if results[i].Err == errCallDispatched {
			return // its step is the run's once its result is given
		}
		r.record(d.Thought, &calls[i], &results[i])
	}
	if sched != nil {
		for _, i := range sched.order() { // the steps in the order run
			results[i].after = sched.after[i]
			record(i)
		}
	} else {
		for i := range calls {
			record(i)
		}
	}
	if transfer >= 0 && results[transfer].Err == nil {
		r.takeHandoff(&calls[transfer])
	}
	r.results = results
	if r.link.journal != nil && r.link.journal.out != nil {
		results = slices.DeleteFunc(results, func(res ToolResult) bool { return res.Err == errCallDispatched })
	}
	r.observe(results)
}

// observe shows results to the model: the planner's way, or as tool
// messages.
func (r *run) observe(results []ToolResult) {
	if o, ok := r.planner.(Observer); ok {
		o.Observe(&r.turn, results)
		return
	}
	for i := range results {
		res := &results[i]
		r.st.Messages = append(r.st.Messages, llm.Message{Role: llm.RoleTool, Content: res.Observation, ToolCallID: res.Call.ID, Name: res.Call.Name})
	}
}

// runParallel runs the calls of which (all of them when nil) together,
// at most max_parallel_tools at a time, starting them in which's order.
func (r *run) runParallel(calls []llm.ToolCall, results []ToolResult, base, transfer int, which []int) {
	sem := make(chan struct{}, max(r.a.limits.MaxParallelTools, 1))
	var wg sync.WaitGroup
	n := len(calls)
	if which != nil {
		n = len(which)
	}
	for k := range n {
		i := k
		if which != nil {
			i = which[k]
		}
		// A slot is taken here, not in the goroutine: the calls start in
		// which's order (most impact first), however many run at once.
		held := true
		select {
		case sem <- struct{}{}:
		case <-r.ctx.Done():
			held = false // exec sees the ended context and records a cancelled call, with its events
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if held {
				defer func() { <-sem }()
			}
			r.exec(i, base, &calls[i], &results[i], i == transfer, false)
		}()
	}
	wg.Wait()
}

// exec runs one call through its tool's handler chain and always emits one
// start and one end event. checked says the run's context was checked
// just before (each check reads the clock).
func (r *run) exec(index, base int, call *llm.ToolCall, res *ToolResult, transfer, checked bool) {
	end := r.callStarted(call)
	res.Call = *call
	start := time.Now()
	res.at = r.since(r.runStart, start)
	b := r.a.table().byName[call.Name]
	attempts := 0
	switch {
	case !checked && r.ctx.Err() != nil:
		res.Err = &tool.ErrorDetails{Type: "cancelled", Message: "the run ended before the call started", Recoverable: false}
	case b == nil:
		res.Err = &tool.ErrorDetails{Type: "unknown_tool", Recoverable: true,
			Message: fmt.Sprintf("there is no tool %q; available tools: %s", call.Name, r.toolNames())}
	case transfer:
		res.Output, res.Err = r.transfer(b, call, index, start)
	case r.fromCache(call, res):
	default:
		c := &tool.Call{ID: call.ID, Name: call.Name, Arguments: call.Arguments, Tool: b.tool, Info: b.info,
			Turn: r.st.Turn, Index: index, Started: start, Time: r.at(start),
			Run: r.info, Budget: r.remaining(index + 1), Reporter: r}
		out, err := b.handler(r.ctx, c)
		if err == errCallDispatched {
			res.Err = err // it runs elsewhere: its end is told when its result is given
			return
		}
		attempts = c.Attempt
		res.attachments = c.Attachments()
		res.Output, res.Observation, res.Err = out.JSON, out.Observation, err
		if err == nil {
			r.keepHints(call, res)
		} else if d := (*tool.ErrorDetails)(nil); errors.As(err, &d) && d.Type == "panic" {
			r.logger.panicked("tool "+call.Name, d.Message, d.Details["stack"])
		}
	}
	if res.Err != nil {
		res.Observation = errorObservation(res.Err)
	} else if res.Observation == "" {
		res.Observation = string(res.Output)
	}
	res.Duration = r.since(start, time.Now())
	r.logger.toolCall(res, base+index+1)
	if end != nil {
		r.callEnded(end, res, attempts)
	}
	res.Attempts = attempts
}

// callStarted emits tool_call_start, when anyone listens, and returns
// the record tool_call_end will carry (nil when nobody listens). Both
// records of a call are one allocation.
func (r *run) callStarted(call *llm.ToolCall) *event.ToolCall {
	if !r.s.bus.Active() {
		return nil
	}
	tc := new([2]event.ToolCall)
	tc[0] = event.ToolCall{ID: call.ID, Name: call.Name, Arguments: r.hideArgs(call.Name, call.Arguments)}
	r.emit(event.Event{Type: event.ToolCallStart, Tool: &tc[0]})
	return &tc[1]
}

// callEnded emits tool_call_end for a finished call into tc.
func (r *run) callEnded(tc *event.ToolCall, res *ToolResult, attempts int) {
	*tc = event.ToolCall{ID: res.Call.ID, Name: res.Call.Name, Arguments: r.hideArgs(res.Call.Name, res.Call.Arguments), Status: "success",
		DurationMS: ms(res.Duration), Attempts: attempts, Output: r.hideArgs(res.Call.Name, res.Output)}
	switch {
	case errors.Is(res.Err, ErrAwaitingApproval):
		tc.Status, tc.Error = "awaiting_approval", res.Err.Error()
	case res.Err != nil:
		tc.Status, tc.Error = "error", res.Err.Error()
	}
	r.emit(event.Event{Type: event.ToolCallEnd, Tool: tc})
}

func (r *run) toolNames() string {
	names := make([]string, 0, len(r.a.table().byName))
	for n := range r.a.table().byName {
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
func (r *run) fromCache(call *llm.ToolCall, res *ToolResult) bool {
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache == nil {
		return false
	}
	e, ok := r.cache[call.Name+"\x00"+string(call.Arguments)]
	if !ok || time.Now().After(e.expires) {
		return false
	}
	res.Output, res.Hints, res.Cached = e.out, e.hints, true
	return true
}

// keepHints reads a result's hints and caches it for its validity period.
func (r *run) keepHints(call *llm.ToolCall, res *ToolResult) {
	h := tool.HintsOf(res.Output)
	if h == nil {
		return
	}
	res.Hints = h
	if h.ValidityPeriod <= 0 {
		return
	}
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	if r.cache == nil {
		r.cache = map[string]cacheEntry{}
	}
	r.cache[call.Name+"\x00"+string(call.Arguments)] = cacheEntry{out: res.Output, hints: h, expires: time.Now().Add(time.Duration(h.ValidityPeriod))}
}

// record adds a finished call to the trace. call is the call as the
// model asked for it (res.Call is a copy): the trace points to it.
func (r *run) record(thought string, call *llm.ToolCall, res *ToolResult) {
	st := r.st
	st.ToolCalls++
	var more *stepMore
	if res.Err != nil || res.Hints != nil || res.Cached || res.after != "" {
		more = &stepMore{hints: res.Hints, cached: res.Cached, after: res.after}
		if res.Err != nil {
			st.ToolErrors++
			more.err = res.Err.Error()
		}
	}
	rec := r.trace.step(res.at, r.st.Turn, thought, call, more)
	rec.dur, rec.attempts, rec.obs = res.Duration, int16(min(res.Attempts, math.MaxInt16)), res.Observation
	switch {
	case res.Err != nil || len(res.Output) == 0:
	case string(res.Output) == res.Observation:
		rec.outIsObs = true
	default: // a cut observation
		if more == nil {
			more = &stepMore{}
			rec.more = more
		}
		more.out = res.Output
		r.warn("the result of %s (call %s) was cut from %d to %d bytes for the model", call.Name, call.ID, len(res.Output), len(res.Observation))
	}
	r.attach(res.attachments)
	_, rec.known = r.a.table().byName[res.Call.Name]
	if res.Hints != nil && !res.Cached { // a cached result's hints were noted when it ran
		r.noteHints(call.Name, res.Hints)
	}
	r.logger.step(rec)
}

// errorObservation is what the model sees of a failed call: the
// StandardToolResult of the failure, as JSON, without a panic's stack.
func errorObservation(err error) string {
	b, mErr := json.Marshal(tool.Failure(toolErrorDetails(err), ""))
	if mErr != nil {
		return `{"status":"error","error":{"type":"tool_error","message":` + strconv.Quote(err.Error()) + `,"recoverable":false}}`
	}
	return string(b)
}

// toolErrorDetails is a failed call's StandardToolResult error, without a
// panic's stack.
func toolErrorDetails(err error) *tool.ErrorDetails {
	var ae *tool.ArgumentError
	if errors.As(err, &ae) {
		return ae.Details()
	}
	d := tool.DetailsFrom(err, true)
	if d.Type == "panic" {
		d = &tool.ErrorDetails{Type: d.Type, Message: d.Message, Recoverable: d.Recoverable}
	}
	return d
}
