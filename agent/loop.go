package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/react"
)

// run is the state of one Session.Run that is not part of State: the
// contexts, the reusable request and the price cache.
type run struct {
	s        *Session
	a        *Agent
	st       *State
	ctx      context.Context
	req      llm.Request
	attempts int // attempts of the model call in flight
	turnAt   time.Time

	priceModel string
	price      llm.Price
	priced     bool

	link *link // sub-agent usage to roll up into this run

	actions []Action // backing store of the steps' actions

	outputRetries int  // corrections asked for so far
	validated     bool // the final answer matched the output schema

	cacheMu sync.Mutex
	cache   map[string]cacheEntry // tool results still valid (from hints)

	reasoning reasoning // what ReAct and tool hints add to the result
}

// Run runs the session to its end and returns the complete Result. The
// error is nil on success; otherwise it matches ErrMaxTurns, ErrTimeout,
// ErrAborted, ErrBudgetExceeded or ErrConfig with errors.Is, or wraps the
// failed model call's *llm.APIError. The Result is never nil.
func (s *Session) Run(ctx context.Context) (*Result, error) {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return nil, ErrSessionUsed
	}
	s.started = true
	ctx, cancel := context.WithCancelCause(ctx)
	s.cancel = cancel
	if s.aborted {
		cancel(ErrAborted)
	}
	s.mu.Unlock()
	defer cancel(nil)
	defer func() {
		for _, u := range s.unsubs {
			u()
		}
	}()

	a := s.agent
	if d := time.Duration(a.limits.TimeoutMS) * time.Millisecond; d > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, d, ErrTimeout)
		defer stop()
	}
	r := &run{s: s, a: a, st: &s.state, link: &link{runID: s.state.RunID, bus: s.bus}}
	r.req = llm.Request{Model: a.model, Tools: a.toolSpecs, Temperature: a.spec.Temperature,
		TopP: a.spec.TopP, MaxOutputTokens: a.spec.MaxOutputTokens, ResponseSchema: a.spec.OutputSchema}
	if a.spec.Mode == ModeReAct {
		// The text protocol: tools are described in the prompt, the final
		// answer's JSON is validated here, and the model stops before it
		// writes an observation itself.
		r.req.Tools, r.req.ResponseSchema, r.req.Stop = nil, nil, react.StopSequences
	}
	ctx = withLink(ctx, r.link)
	ctx = llm.WithTrace(ctx, &llm.Trace{Retry: r.onRetry, Fallback: r.onFallback})
	r.ctx = ctx
	r.st.StartedAt = Timestamp{time.Now()}
	r.st.ToolLatencyMS = map[string]float64{}
	// Room for a typical run, so the trace does not grow turn by turn.
	if n := min(a.limits.MaxTurns, 16); cap(r.st.ModelCalls) == 0 {
		r.st.ModelCalls = make([]ModelCall, 0, n)
		r.st.Steps = make([]Step, 0, n)
		r.actions = make([]Action, 0, n)
	}
	if s.bus.Active() {
		r.emit(event.Event{Type: event.RunStart, Data: map[string]any{
			"agent_version": a.spec.Version, "model": a.modelName, "provider": a.providerName, "session_id": s.state.SessionID}})
	}
	res, err := r.loop()
	return r.finish(res, err)
}

// outcome is how the loop ended.
type outcome struct {
	reason  TerminateReason
	content string
	output  map[string]any // the validated structured output
	code    string
	details map[string]any
}

func (r *run) loop() (outcome, error) {
	st := r.st
	switch r.a.spec.Mode {
	case ModeTools, ModeReAct, ModeChooser, ModeWriter, ModeExtractor:
	default:
		err := fmt.Errorf("%w: mode %s runs in a pipeline stage, not on its own", ErrConfig, r.a.spec.Mode)
		return outcome{reason: ReasonError, code: CodeConfigError}, err
	}
	if r.s.provider == nil {
		return outcome{reason: ReasonError, code: CodeConfigError}, fmt.Errorf("%w: agent %s has no model", ErrConfig, r.a.spec.AgentName)
	}
	for {
		a := r.a // a handoff may change the agent between turns
		if o, err := r.checkBudgets(true); err != nil {
			return o, err
		}
		if st.Turn >= a.limits.MaxTurns {
			return outcome{reason: ReasonMaxTurns, code: CodeMaxTurns,
				details: map[string]any{"max_turns": a.limits.MaxTurns}}, fmt.Errorf("%w (%d)", ErrMaxTurns, a.limits.MaxTurns)
		}
		st.Turn++
		if r.s.bus.Active() {
			r.turnAt = time.Now()
			r.emit(event.Event{Type: event.TurnStart})
		}
		resp, err := r.callModel()
		if err != nil {
			return r.modelFailure(err)
		}
		st.Messages = append(st.Messages, resp.Message())
		st.LastContent = resp.Content
		if a.spec.Mode == ModeReAct {
			done, o, err := r.reactTurn(resp.Content)
			r.endTurn()
			if done {
				return o, err
			}
			if r.ctx.Err() != nil {
				return r.contextEnd()
			}
			continue
		}
		if len(resp.ToolCalls) == 0 {
			again, o, err := r.finalAnswer(resp.Content)
			r.endTurn()
			if again {
				continue
			}
			return o, err
		}
		if resp.Content != "" && r.s.bus.Active() {
			r.emit(event.Event{Type: event.Thinking, Content: resp.Content})
		}
		if o, err := r.checkBudgets(false); err != nil {
			return o, err
		}
		if m := a.limits.MaxToolCalls; m > 0 && st.ToolCalls+len(resp.ToolCalls) > m {
			return outcome{reason: ReasonBudgetExceeded, code: CodeBudgetExceeded, details: map[string]any{
					"budget": "max_tool_calls", "limit": m, "used": st.ToolCalls, "requested": len(resp.ToolCalls)}},
				errBudget("max_tool_calls", m, st.ToolCalls)
		}
		r.runTools(resp)
		r.endTurn()
		if r.ctx.Err() != nil {
			return r.contextEnd()
		}
	}
}

func errBudget(name string, limit, used int) error {
	return fmt.Errorf("%w: %s %d: %d used, the model asked for more", ErrBudgetExceeded, name, limit, used)
}

func (r *run) endTurn() {
	if r.s.bus.Active() {
		d := 0.0
		if !r.turnAt.IsZero() { // a listener may have subscribed mid-turn
			d = ms(time.Since(r.turnAt))
		}
		r.emit(event.Event{Type: event.TurnEnd, Data: map[string]any{
			"duration_ms": d, "total_tokens": r.st.Usage.TotalTokens}})
	}
}

// checkBudgets ends the run when the token or cost budget is spent. Before
// a model call (before=true) reaching the budget is enough; after one,
// the budget must be exceeded.
func (r *run) checkBudgets(before bool) (outcome, error) {
	if err := r.ctx.Err(); err != nil {
		return r.contextEnd()
	}
	r.link.merge(r)
	l, st := r.a.limits, r.st
	over := func(used, limit float64) bool { return used > limit || before && used >= limit }
	if l.MaxTotalTokens > 0 && over(float64(st.Usage.TotalTokens), float64(l.MaxTotalTokens)) {
		return outcome{reason: ReasonBudgetExceeded, code: CodeBudgetExceeded, details: map[string]any{
				"budget": "max_total_tokens", "limit": l.MaxTotalTokens, "used": st.Usage.TotalTokens}},
			fmt.Errorf("%w: max_total_tokens %d, %d used", ErrBudgetExceeded, l.MaxTotalTokens, st.Usage.TotalTokens)
	}
	if l.MaxCostUSD > 0 && over(st.CostUSD, l.MaxCostUSD) {
		return outcome{reason: ReasonBudgetExceeded, code: CodeBudgetExceeded, details: map[string]any{
				"budget": "max_cost_usd", "limit": l.MaxCostUSD, "used": st.CostUSD}},
			fmt.Errorf("%w: max_cost_usd %g, %.6f used", ErrBudgetExceeded, l.MaxCostUSD, st.CostUSD)
	}
	return outcome{}, nil
}

// contextEnd classifies the end of the run's context: its deadline (or a
// caller's) is a timeout; anything else is an abort.
func (r *run) contextEnd() (outcome, error) {
	cause := context.Cause(r.ctx)
	if errors.Is(cause, ErrTimeout) || errors.Is(cause, context.DeadlineExceeded) {
		return outcome{reason: ReasonTimeout, code: CodeTimeout, details: map[string]any{"timeout_ms": r.a.limits.TimeoutMS}},
			fmt.Errorf("%w after %s", ErrTimeout, time.Since(r.st.StartedAt.Time).Round(time.Millisecond))
	}
	return outcome{reason: ReasonAborted, code: CodeAborted}, ErrAborted
}

func (r *run) modelFailure(err error) (outcome, error) {
	if r.ctx.Err() != nil {
		return r.contextEnd()
	}
	var ae *llm.APIError
	rec := errors.As(err, &ae) && ae.Kind.Retryable()
	o := outcome{reason: ReasonError, code: CodeLLMError, details: map[string]any{"kind": llm.KindOf(err).String()}}
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Error, Error: &event.ErrorInfo{Code: CodeLLMError, Message: err.Error()}})
	}
	if rec {
		o.details["recoverable"] = true
	}
	return o, fmt.Errorf("model call failed: %w", err)
}

func (r *run) onRetry(info llm.RetryInfo) {
	r.attempts++
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Retry, Attempt: info.Attempt, WaitMS: info.Wait.Milliseconds(),
			Error: &event.ErrorInfo{Code: CodeLLMError, Message: info.Err.Error()}})
	}
}

// onFallback reports a fall-over to the next model as a retry event.
func (r *run) onFallback(info llm.FallbackInfo) {
	r.attempts++
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.Retry, Error: &event.ErrorInfo{Code: CodeLLMError, Message: info.Err.Error()},
			Data: map[string]any{"fallback_from": info.FromProvider + ":" + info.FromModel, "fallback_to": info.ToProvider + ":" + info.ToModel}})
	}
}

func (r *run) callModel() (*llm.Response, error) {
	st := r.st
	r.req.Messages = st.Messages
	r.attempts = 1
	start := time.Now()
	resp, err := r.generate()
	d := time.Since(start)
	mc := ModelCall{Turn: st.Turn, Provider: r.a.providerName, Model: r.a.model, DurationMS: ms(d), Attempts: r.attempts}
	if r.a != r.s.agent {
		mc.Agent = r.a.spec.AgentName // the conversation was handed off
	}
	st.ModelLatencyMS += mc.DurationMS
	if err != nil {
		mc.Error = err.Error()
		if resp != nil { // a broken stream: keep what arrived
			r.account(resp, &mc)
			mc.Partial = resp.Content
		}
		st.ModelCalls = append(st.ModelCalls, mc)
		return nil, err
	}
	if resp == nil {
		err = &llm.APIError{Kind: llm.KindInvalidRequest, Provider: r.a.providerName, Model: r.a.model, Message: "provider returned no response"}
		mc.Error = err.Error()
		st.ModelCalls = append(st.ModelCalls, mc)
		return nil, err
	}
	r.account(resp, &mc)
	st.ModelCalls = append(st.ModelCalls, mc)
	return resp, nil
}

// generate calls the provider, streaming when someone listens and the
// provider can. A provider that panics fails the call instead of the run.
func (r *run) generate() (resp *llm.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, &llm.APIError{Kind: llm.KindUnknown, Provider: r.a.providerName, Model: r.a.model,
				Message: fmt.Sprintf("provider panicked: %v", p)}
		}
	}()
	if sp, ok := r.s.provider.(llm.Streamer); ok && r.s.bus.Active() {
		return llm.Collect(sp.Stream(r.ctx, &r.req), func(c llm.Chunk) {
			if c.Text != "" {
				r.emit(event.Event{Type: event.ContentChunk, Content: c.Text})
			}
		})
	}
	return r.s.provider.Generate(r.ctx, &r.req)
}

// account adds a call's usage and cost to the run.
func (r *run) account(resp *llm.Response, mc *ModelCall) {
	if resp.Provider != "" {
		mc.Provider = resp.Provider
		r.st.Provider = resp.Provider
	}
	model := resp.Model
	if model == "" {
		model = r.a.model
	} else {
		mc.Model = model
		r.st.Model = model
	}
	if !r.priced || model != r.priceModel {
		r.price, r.priced = r.a.pricing.Lookup(model)
		r.priceModel = model
		r.priced = true
	}
	mc.PromptTokens, mc.CompletionTokens = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	mc.CostUSD = r.price.Cost(resp.Usage)
	r.st.Usage.Add(resp.Usage)
	r.st.CostUSD += mc.CostUSD
}

func (r *run) emit(e event.Event) {
	e.RunID = r.st.RunID
	e.AgentName = r.st.AgentName
	e.ParentRunID = r.st.ParentRunID
	e.Turn = r.st.Turn
	e.Time = time.Now()
	r.s.bus.Publish(e)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
