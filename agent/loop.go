package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/internal/lazyctx"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/retry"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// run is the state of one Session.Run that is not part of State: the
// context, the reusable request, the planner's view and the price cache.
type run struct {
	s        *Session
	a        *Agent // the agent whose turn it is (a handoff changes it)
	planner  Planner
	st       *State
	ctx      context.Context
	deadline lazyctx.Ctx // the run's timeout, when it has one
	final    Final       // the answer, when a planner gives a plain one
	req      llm.Request
	turn     Turn
	logger   runLogger
	limits   budget // the spec's limits, tightened by the run's budget

	attempts    int32 // attempts of the model call in flight, over all the models it tried
	triedBefore int32 // of them, those of the models given up on (fallbacks)
	runStart    time.Time
	turnAt      time.Duration // since runStart, when someone listens; 0 before
	stream      *chunker      // streamed text on its way to events, made once a run

	price *modelPrice // of the model that answered last

	link    link         // sub-agent usage to roll up into this run
	info    *tool.Run    // what tools see of the run: the session's
	results []ToolResult // the last turn's tool results

	trace trace    // the steps and model calls so far, compact
	otel  *runSpan // the run's span; nil when nobody traces

	outputRetries uint16 // corrections asked for so far (saturating)
	unpriced      bool   // a model answered that the pricing table does not know
	fixed         bool   // the run's clock does not move (WithNow)
	validated     bool   // the final answer matched the output schema

	// The session's (under its mu): whether it ran, whether it was
	// aborted, and how a resumed session aborted (or out of time) before
	// it ran ends, once it went through its log, so that its Result holds
	// the run so far: at the first thing it would do anew (afterLogEnds;
	// 0: it goes on).
	started, aborted bool
	afterLog         uint8

	cacheMu sync.Mutex
	cache   map[string]cacheEntry // tool results still valid (from hints)

	mem *runMemory // the run's memory; nil without

	reasoning *reasoning // what ReAct and tool hints add to the result; nil until they do
	notes     *runNotes  // warnings, retries and attachments; nil until there are some
}

// Run runs the session to its end and returns the complete Result. The
// error is nil on success; otherwise it matches one of ErrMaxTurns,
// ErrTimeout, ErrAborted, ErrBudgetExceeded, ErrModel (with the failed
// call's *llm.APIError), ErrTool, ErrValidation or ErrConfig with
// errors.Is. The Result is nil only when the session cannot run at all:
// it ran before (ErrSessionUsed), or its service refused it.
func (s *Session) Run(ctx context.Context) (*Result, error) {
	s.mu.Lock()
	if s.run.started {
		s.mu.Unlock()
		return nil, ErrSessionUsed
	}
	s.run.started = true
	if s.svc != nil {
		if err := s.svc.start(s); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		defer s.svc.done(s)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	s.cancel = cancel
	if s.run.aborted && s.cfg.resume != nil {
		s.run.afterLog = afterAbort
	} else if s.run.aborted {
		cancel(ErrAborted)
	}
	s.mu.Unlock()
	defer cancel(nil)
	defer func() {
		s.bus.Flush() // the session's listeners have seen the whole run when Run returns
		for _, l := range s.cfg.onEvent {
			l.unsub()
		}
		if j := s.run.link.journal; j != nil && j.unsub != nil {
			j.unsub()
		}
	}()

	a := s.agent
	r := &s.run // a session runs once: its run is part of it, not another allocation
	r.s, r.a, r.planner, r.st = s, a, s.planner, &s.state
	r.actFor(ctx)
	r.link.run = r
	r.turn.r = r
	r.bound(cancel)
	if d := r.limits.timeout; d > 0 {
		// No timer until something waits on the run's context: a run that
		// only polls it (most do) never arms one. It lives in the run.
		r.deadline.Init(ctx, d, ErrTimeout)
		defer r.deadline.Release()
		ctx = &r.deadline
	}
	ctx, j, refused, err := r.begin(r.prepare(ctx))
	if err != nil {
		s.freeResume(ctx, j)
		return r.finish(nil, err)
	}
	r.logger.runStart()
	if s.bus.Active() {
		r.emit(event.Event{Type: event.RunStart, Data: map[string]any{
			"agent_version": a.spec.Version, "model": a.modelName, "provider": a.providerName, "session_id": s.state.SessionID}})
	}
	var res *Result
	if refused != nil {
		res, err = r.finish(nil, refused)
	} else {
		res, err = r.finish(r.loop())
	}
	if j != nil {
		s.bus.Flush() // run_end is on record before the Result
		var jerr error
		switch {
		case errors.Is(err, ErrInterrupted):
			jerr = j.interrupt(ctx, res)
		case errors.Is(err, drive.ErrDispatched):
			jerr = j.yield(ctx, err)
		default:
			jerr = j.end(ctx, res)
		}
		if jerr != nil && (err == nil || errors.Is(err, drive.ErrDispatched)) {
			err = redactErr(jerr, a.redact)
		}
	}
	return res, err
}

// bound sets the run's limits: the agent's, tightened by the run's
// options and its input's constraints, its time cut to a deadline a
// driver gave (WithDeadline); a deadline passed already ends a new run at
// once (cancel), and a resumed one once it has gone through its log.
func (r *run) bound(cancel context.CancelCauseFunc) {
	s := r.s
	r.limits = s.cfg.tighten(r.a.limits)
	r.limits.window = int32(min(r.a.window, math.MaxInt32))
	if _, ok := s.state.Input["constraints"]; ok {
		c, _ := constraintsOf(s.state.Input) // checked by NewSession
		r.limits.constrain(c)
	}
	if e := s.cfg.extra; e != nil && !e.deadline.IsZero() {
		switch left := time.Until(e.deadline); {
		case left > 0 && (r.limits.timeout <= 0 || left < r.limits.timeout):
			r.limits.timeout = left
		case left <= 0 && s.cfg.resume != nil:
			s.run.afterLog = afterTimeout
		case left <= 0:
			cancel(ErrTimeout)
		}
	}
}

// begin admits the run: the caller's access, its memory, the filters on
// its input, and its log, opened. refused is why the run may not go on
// (audited once the log is open); err why it cannot start at all.
func (r *run) begin(ctx context.Context) (_ context.Context, j *runJournal, refused, err error) {
	if r.admit(ctx) { // a caller who may not run the agent reads none of its memory, nor its conversation
		if err := r.recall(ctx); err != nil {
			return ctx, nil, nil, err
		}
		if err := r.joinConversation(ctx); err != nil {
			return ctx, nil, nil, err
		}
	}
	ctx = r.ctx // with the memory tools' scope, when the agent has memory
	var applied []policy.Applied
	if r.a.inFilters != nil {
		applied = r.filterInput() // before the log's start record: it keeps what passed
	}
	j, err = r.s.openJournal(ctx, r)
	for tries := 1; errors.Is(err, store.ErrStaleHistory) && tries < 8; tries++ {
		// Another run of the conversation ended after this one read its
		// history: it reads it again, so that nothing said is missed.
		if err = r.rejoin(ctx); err == nil {
			j, err = r.s.openJournal(ctx, r)
		}
	}
	if err != nil {
		var busy *store.BusyError
		if errors.As(err, &busy) {
			err = withDetails(err, map[string]any{"conversation": busy.Conversation, "run_id": busy.RunID, "status": string(busy.Status)})
		}
		return ctx, nil, nil, err
	}
	refused = r.reportDenials(ctx)
	if refused == nil && len(applied) > 0 {
		refused = r.reportInput(ctx, applied)
	}
	return ctx, j, refused, nil
}

// prepare readies the run: its request, what tools see of it, its
// context (the run in it, as the policy's Host and the model calls'
// Trace), its logger, its clock, and room for its trace.
func (r *run) prepare(ctx context.Context) context.Context {
	s, a := r.s, r.a
	r.setRequest(a)
	s.setRunInfo()
	r.info = &s.cfg.info
	ctx = r.startSpan(ctx)
	ctx = withRun(ctx, r)
	ctx = llm.WithTrace(ctx, r) // a run is its model calls' Trace: retries and fall-overs become events
	if tp := r.info.TraceParent; tp != "" {
		ctx = llm.WithTraceContext(ctx, tp, r.info.TraceState) // model calls join the caller's trace
	}
	if e := s.cfg.extra; e != nil && e.seeded {
		// Retry jitter from the seed: a deterministic run waits alike.
		ctx = retry.WithSource(ctx, rand.NewPCG(uint64(e.seed), 0x5eed))
	}
	r.ctx = ctx
	r.logger = runLogger{r: r}
	r.runStart = time.Now()
	if e := s.cfg.extra; e != nil && !e.now.IsZero() {
		r.runStart, r.fixed = e.now, true
	}
	r.st.StartedAt = Timestamp{r.runStart}
	r.trace.reserve(a.sizes)
	return ctx
}

// setRequest prepares the request the model is called with; a handoff
// calls it again for the new agent.
func (r *run) setRequest(a *Agent) {
	r.req = llm.Request{Model: a.model, Tools: a.table().specs, Temperature: a.spec.Temperature,
		TopP: a.spec.TopP, MaxOutputTokens: a.spec.MaxOutputTokens, ResponseSchema: a.spec.OutputSchema}
	if _, ok := r.planner.(reactPlanner); ok {
		// The text protocol: tools are described in the prompt, the final
		// answer's JSON is validated here, and the model stops before it
		// writes an observation itself.
		r.req.Tools, r.req.ResponseSchema, r.req.Stop = nil, nil, reactStop
	}
	r.price = nil
}

// loop is plan → act → observe until an ending. It knows nothing of
// modes: the planner decides, the tool chain acts.
func (r *run) loop() (*Final, error) {
	st := r.st
	for {
		if err := r.checkBudgets(true); err != nil {
			return nil, err
		}
		if st.Turn >= int(r.limits.maxTurns) {
			return nil, withDetails(fmt.Errorf("%w (%d)", ErrMaxTurns, r.limits.maxTurns), map[string]any{"max_turns": r.limits.maxTurns})
		}
		st.Turn++
		r.startTurn()
		d, err := r.plan()
		if err != nil {
			r.endTurn()
			return nil, r.failure(err)
		}
		switch {
		case d.Final != nil:
			r.endTurn()
			return d.Final, d.Final.Err
		case len(d.Calls) > 0:
			if err := r.act(&d); err != nil {
				if !errors.Is(err, drive.ErrDispatched) { // the turn ends once its calls have run
					r.endTurn()
				}
				return nil, err
			}
		case d.Message != nil:
			st.Messages = append(st.Messages, *d.Message)
		}
		r.endTurn() // the next turn's budgets see whether the run's context ended
	}
}

// plan asks the planner for the turn's decision; a panicking planner
// fails the run instead of the process.
func (r *run) plan() (d Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			stack := string(debug.Stack())
			r.logger.panicked("planner", p, stack)
			d, err = Decision{}, withDetails(fmt.Errorf("%w: planner panicked: %v", ErrConfig, p), map[string]any{"stack": stack})
		}
	}()
	return r.planner.Next(r.ctx, &r.turn)
}

// act runs a turn's tool calls after checking the budgets the model's
// reply may have spent. Calls that will not run are still answered, so
// the transcript never holds a question without its answer.
func (r *run) act(d *Decision) error {
	if d.Thought != "" && r.s.bus.Active() {
		r.emit(event.Event{Type: event.Thinking, Content: d.Thought})
	}
	err := r.checkBudgets(false)
	if m := r.limits.maxToolCalls; err == nil && m >= 0 && r.st.ToolCalls+len(d.Calls) > m {
		err = withDetails(fmt.Errorf("%w: max_tool_calls %d: %d used, the model asked for %d more", ErrBudgetExceeded, m, r.st.ToolCalls, len(d.Calls)),
			map[string]any{"budget": "max_tool_calls", "limit": m, "used": r.st.ToolCalls, "requested": len(d.Calls)})
	}
	if err != nil {
		r.skip(d.Calls, err)
		return err
	}
	r.runTools(d)
	return r.stopFor(r.results)
}

// stopFor returns the ending a call's middleware chose for the run (a
// call awaiting approval, a store that failed), once the turn's calls
// are all answered. Calls awaiting approval are named together.
func (r *run) stopFor(results []ToolResult) error {
	var waiting []*ApprovalError
	var first error
	for i := range results {
		err := results[i].Err
		if err == errCallDispatched {
			continue // the turn ends with the list of them (dispatchEnd)
		}
		if err != nil && first == nil && r.a.retry.Fatal(results[i].Call.Name) && !ends(err) {
			c := &results[i].Call
			first = withDetails(fmt.Errorf("%w: %s (retry.tools.%s.fatal): %w", ErrTool, c.Name, c.Name, err),
				map[string]any{"tool": c.Name, "call_id": c.ID, "fatal": true})
			continue
		}
		if err == nil || !ends(err) {
			continue
		}
		if ae := (*ApprovalError)(nil); errors.As(err, &ae) {
			waiting = append(waiting, ae)
		}
		if first == nil {
			first = err
		}
	}
	var paused error
	if len(waiting) > 0 {
		paused = &awaitingError{calls: waiting}
	}
	if first != nil && !errors.Is(first, ErrAwaitingApproval) {
		r.dispatchEnd(nil) // an abort, a store's failure or a fatal call ends the run: nothing is handed out
		return first
	}
	if err := r.dispatchEnd(paused); err != nil {
		return err
	}
	if paused != nil {
		return paused
	}
	return first
}

// skip answers calls that will not run: in the transcript, and with a
// start and an end event each (status "skipped", the reason as error),
// so that the events match the transcript.
func (r *run) skip(calls []llm.ToolCall, why error) {
	results := make([]ToolResult, len(calls))
	for i, c := range calls {
		d := &tool.ErrorDetails{Type: "not_run", Message: "the call was not run: " + why.Error(), Recoverable: false}
		results[i] = ToolResult{Call: c, Err: d, Observation: errorObservation(d)}
		if end := r.callStarted(&calls[i]); end != nil {
			*end = event.ToolCall{ID: c.ID, Name: c.Name, Arguments: r.hideArgs(c.Name, c.Arguments), Status: "skipped", Error: d.Message}
			r.emit(event.Event{Type: event.ToolCallEnd, Tool: end})
		}
	}
	r.observe(results)
}

func (r *run) startTurn() {
	if r.a.sets != nil {
		r.refreshTools()
	}
	r.logger.turnStart()
	if r.s.bus.Active() {
		now := r.now()
		r.turnAt = max(now.Sub(r.runStart), 1)
		r.emit(event.Event{Type: event.TurnStart, Time: now})
	}
}

func (r *run) endTurn() {
	if r.s.bus.Active() {
		d := 0.0
		if r.turnAt > 0 { // a listener may have subscribed mid-turn
			d = ms(r.since(r.runStart, time.Now()) - r.turnAt)
		}
		r.emit(event.Event{Type: event.TurnEnd, DurationMS: d, TotalTokens: r.st.Usage.TotalTokens})
	}
}

// checkBudgets ends the run when the token or cost budget is spent. Before
// a model call (before=true) reaching the budget is enough; after one,
// the budget must be exceeded.
func (r *run) checkBudgets(before bool) error {
	if err := r.ctx.Err(); err != nil {
		return r.contextEnd()
	}
	r.link.merge(r)
	l, st := r.limits, r.st
	over := func(used, limit float64) bool { return used > limit || before && used >= limit }
	if l.maxTokens >= 0 && over(float64(st.Usage.TotalTokens), float64(l.maxTokens)) {
		return withDetails(fmt.Errorf("%w: max_total_tokens %d, %d used", ErrBudgetExceeded, l.maxTokens, st.Usage.TotalTokens),
			map[string]any{"budget": "max_total_tokens", "limit": l.maxTokens, "used": st.Usage.TotalTokens})
	}
	if l.maxCost >= 0 && over(st.CostUSD, l.maxCost) {
		return withDetails(fmt.Errorf("%w: max_cost_usd %g, %.6f used", ErrBudgetExceeded, l.maxCost, st.CostUSD),
			map[string]any{"budget": "max_cost_usd", "limit": l.maxCost, "used": st.CostUSD})
	}
	return nil
}

// contextEnd classifies the end of the run's context: its deadline (or a
// caller's) is a timeout; anything else is an abort.
func (r *run) contextEnd() error {
	cause := context.Cause(r.ctx)
	switch {
	case errors.Is(cause, ErrTimeout) || errors.Is(cause, context.DeadlineExceeded):
		took := r.limits.timeout // a fixed clock says nothing of how long it took
		if !r.fixed {
			took = time.Since(r.runStart).Round(time.Millisecond)
		}
		return withDetails(fmt.Errorf("%w after %s", ErrTimeout, took),
			map[string]any{"timeout_ms": r.limits.timeout.Milliseconds()})
	case ends(cause):
		return cause // a seam stopped the run (a lost lease)
	}
	return ErrAborted
}

// failure classifies a planner's error: the run's own end, a model call
// that failed, or the planner's own error.
func (r *run) failure(err error) error {
	if r.ctx.Err() != nil {
		return r.contextEnd()
	}
	if ends(err) {
		return err // the run log or another seam ended the run
	}
	// Only a model's failure is a model error; any other error keeps its
	// own row of the ending table, or is an internal_error.
	var ae *llm.APIError
	if errors.As(err, &ae) && !errors.Is(err, ErrModel) {
		err = withDetails(fmt.Errorf("%w: %w", ErrModel, err), map[string]any{"kind": ae.Kind.String()})
	}
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Error, Error: &event.ErrorInfo{Code: endingOf(err).code, Message: err.Error()}})
	}
	return err
}

func (r *run) emit(e event.Event) {
	e.RunID = r.st.RunID
	e.AgentName = r.st.AgentName
	e.ParentRunID = r.st.ParentRunID
	e.TraceID = r.info.TraceID
	e.Turn = r.st.Turn
	if e.Turn < r.quiet() && !r.tail(&e) {
		return // a resumed run replays these turns: their events are on record
	}
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	r.a.redact.Event(&e)
	r.s.bus.Publish(e)
}

// now is the run's start advanced on the monotonic clock: one clock read
// where time.Now makes two (a fifth of an event's cost on a virtual
// machine), and the times of a run's events never go backwards when the
// wall clock is set.
func (r *run) now() time.Time {
	if r.fixed {
		return r.runStart
	}
	return r.runStart.Add(time.Since(r.runStart))
}

// at is the run's time for the wall clock's t: t, or the fixed instant.
func (r *run) at(t time.Time) time.Time {
	if r.fixed {
		return r.runStart
	}
	return t
}

// since is how long from start to end, by the run's clock: 0 when it
// does not move.
func (r *run) since(start, end time.Time) time.Duration {
	if r.fixed {
		return 0
	}
	return end.Sub(start)
}

// tail reports whether e is one of the events a dispatching run's turn
// still owes once its calls have run: their ends, and the turn's.
func (r *run) tail(e *event.Event) bool {
	j := r.link.journal
	if j == nil || j.tailTurn == 0 || e.Turn != j.tailTurn {
		return false
	}
	switch e.Type {
	case event.TurnEnd:
		return true
	case event.ToolCallEnd:
		for key, res := range j.supplied {
			if res.CallID == e.Tool.ID && strings.HasPrefix(key, r.st.RunID+":"+strconv.Itoa(e.Turn)+":") {
				return true
			}
		}
	}
	return false
}

// quiet is the turn before which a resumed run emits no events and
// writes no log records: those turns did so when they ran.
func (r *run) quiet() int {
	if j := r.link.journal; j != nil {
		return j.quiet
	}
	return 0
}

func ms(d time.Duration) float64 { return journal.Millis(d) }

// jsonValue converts Go values to the form JSON decoding produces, which
// is what schema validation expects.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if dec.Decode(&out) != nil {
		return v
	}
	return out
}
