package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

// runState is one pipeline run.
type runState struct {
	p     *Pipeline
	env   *Envelope
	bus   *event.Bus
	runID string
	start time.Time
	res   *Result
	last  map[string]any // the last stage's output
	// unpriced is set once a stage ran a model the pricing table lacks:
	// the run's cost is then unknown.
	unpriced bool
	confs    []float64 // the stage agents' confidences
	// sessionOpts go to every stage agent's session (WithSessionOptions).
	sessionOpts []agent.RunOption
	store       *journal.Writer // set with WithStore
	unsub       func()
	log         *slog.Logger    // the pipeline's, bound to the run; nil: none
	ctx         context.Context // the caller's, for log records
	// set is what the session options set that the pipeline's own
	// events and records follow: the trace id, the seed, the clock.
	set  agent.Settings
	span oteltrace.Span // the run's invoke_workflow span; nil when nobody traces
	// dispatch: agent stages are handed out (Drive); given is the
	// Result of the one handed out last, when the run goes on (Continue).
	dispatch bool
	given    *agent.Result
	started  *StageRecord // the stage it handed out, begun before it stopped
	// conversation is the conversation the run is part of, and history
	// what was said in it before the run, which its stages start from.
	conversation string
	history      []llm.Message
}

// now is the run's clock: the fixed instant of a deterministic run.
func (r *runState) now() time.Time {
	if !r.set.Now.IsZero() {
		return r.set.Now
	}
	return time.Now()
}

// since is how long since start by the run's clock.
func (r *runState) since(start time.Time) float64 {
	return journal.Millis(r.now().Sub(start))
}

func (p *Pipeline) run(ctx context.Context, env *Envelope, opts []RunOption) (*Result, error) {
	var c runConfig
	for _, o := range opts {
		o(&c)
	}
	if err := p.checkDispatch(&c); err != nil {
		return nil, err
	}
	r := &runState{p: p, env: env, bus: event.NewBus(c.bus), sessionOpts: c.sessionOpts, set: agent.SettingsOf(c.sessionOpts...), dispatch: c.dispatch}
	r.start = r.now()
	if c.cont != nil {
		var err error
		if env, err = r.restore(c.cont); err != nil {
			return nil, err
		}
		r.env = env
	}
	if err := p.checkCurrent(env); err != nil {
		return nil, err
	}
	r.name(c.runID)
	ctx = r.startSpan(ctx, env)
	r.ctx = ctx
	if p.logger != nil {
		r.log = p.logger.With(slog.String("pipeline", p.def.PipelineName), slog.String("pipeline_version", p.def.Version),
			slog.String("run_id", r.runID))
		r.logf(ctx, slog.LevelInfo, "pipeline start", slog.String("stage", env.Current))
	}
	for _, l := range c.onEvent {
		defer r.bus.Subscribe(l.fn, l.opts...)()
	}
	if err := r.openStore(ctx, &c); err != nil {
		return nil, err
	}
	defer r.bus.Flush() // before the unsubscribes: listeners see the whole run
	if c.cont == nil {
		r.res = &Result{Envelope: env}
		r.res.Result = agent.Result{ID: r.runID, SessionID: env.ID, AgentName: p.def.PipelineName, AgentVersion: p.def.Version,
			StartedAt: agent.Timestamp{Time: r.start}, Steps: []agent.Step{}, ToolsUsed: []string{}, ModelCalls: []agent.ModelCall{},
			Messages: []llm.Message{}, Metrics: agent.Metrics{ToolLatencyMS: map[string]float64{}}, TraceID: r.set.TraceID,
			Seed: r.set.Seed, Deterministic: r.set.Seed != nil && !r.set.Now.IsZero()}
	}
	if p.def.TimeoutMS > 0 {
		// From the run's start: a dispatched run's steps share one clock.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, r.start.Add(time.Duration(p.def.TimeoutMS)*time.Millisecond), agent.ErrTimeout)
		defer cancel()
	}
	if c.cont == nil { // a dispatched run's start is on record from its first step
		r.emit(event.Event{Type: event.RunStart, Data: map[string]any{"pipeline": p.def.PipelineName, "version": p.def.Version, "stage": env.Current}})
	}
	for env.Current != End {
		if err := ctx.Err(); err != nil {
			cause := context.Cause(ctx)
			if errors.Is(cause, agent.ErrTimeout) || errors.Is(cause, context.DeadlineExceeded) {
				return r.finish(agent.OutcomePartial, agent.ReasonTimeout, agent.CodeTimeout, env.Current, fmt.Errorf("%w: pipeline %s", agent.ErrTimeout, p.def.PipelineName))
			}
			return r.finish(agent.OutcomePartial, agent.ReasonAborted, agent.CodeAborted, env.Current, agent.ErrAborted)
		}
		st := p.stages[env.Current]
		if env.HopCount >= p.def.MaxHops && r.started == nil { // a stage begun before a dispatched run stopped has its hop
			return r.finish(agent.OutcomeError, agent.ReasonMaxTurns, agent.CodeMaxTurns, st.def.Name,
				fmt.Errorf("%w: stage %s would be hop %d of at most %d", ErrMaxHops, st.def.Name, env.HopCount+1, p.def.MaxHops))
		}
		done, res, err := r.stage(ctx, st)
		if done {
			return res, err
		}
		if c.oneStage {
			break
		}
	}
	return r.finish(outcomeOf(r.last), agent.ReasonCompleted, "", "", nil)
}

// stage runs one stage through the lifecycle of the jeeves Agent: record
// the start, pre-process, process, check the required fields, store the
// output, post-process, route, record the completion.
func (r *runState) stage(ctx context.Context, st *stage) (bool, *Result, error) {
	env := r.env
	var rec StageRecord
	if r.started != nil { // the stage a dispatched run handed out began before it stopped
		rec, r.started = *r.started, nil
	} else {
		rec = r.begin(ctx, st)
	}
	if r.handsOut(st) {
		return true, nil, r.yield(ctx, st, rec)
	}
	fail := func(code string, err error) (bool, *Result, error) {
		level := slog.LevelWarn
		if errors.Is(err, ErrHook) {
			level = slog.LevelError
		}
		r.logf(ctx, level, "stage failed", slog.String("stage", st.def.Name), slog.String("code", code), slog.String("error", r.p.red.String(err.Error())))
		rec.Outcome, rec.Error = agent.OutcomeError, err.Error()
		rec.DurationMS = r.since(rec.StartedAt.Time)
		env.History = append(env.History, rec)
		env.Errors = append(env.Errors, StageError{Stage: st.def.Name, Code: code, Message: err.Error()})
		r.completed(rec)
		res, err := r.finish(agent.OutcomeError, agent.ReasonError, code, st.def.Name, err)
		return true, res, err
	}
	if h := st.hooks.PreProcess; h != nil {
		if err := guard(func() error { return h(ctx, env) }); err != nil {
			return fail(agent.CodeToolError, fmt.Errorf("%w: stage %s: pre-process: %v", ErrHook, st.def.Name, err))
		}
	}
	var output map[string]any
	var outcome agent.Outcome
	var code string
	err := guard(func() (err error) {
		output, outcome, code, err = r.process(ctx, st, &rec)
		return err
	})
	if err != nil {
		if code == "" {
			code = agent.CodeToolError
		}
		if pe := (*panicError)(nil); errors.As(err, &pe) {
			err = fmt.Errorf("%w: stage %s: %w", ErrHook, st.def.Name, err)
		}
		return fail(code, err)
	}
	if outcome != agent.OutcomeSkip {
		for _, f := range st.def.RequiredOutputFields {
			if _, ok := lookup(output, f); !ok {
				return fail(agent.CodeValidation, fmt.Errorf("%w: stage %s: output has no field %q", ErrMissingOutput, st.def.Name, f))
			}
		}
		env.Outputs[st.def.OutputKey] = output
		r.last = output
	}
	if h := st.hooks.PostProcess; h != nil {
		if err := guard(func() error { return h(ctx, env, output) }); err != nil {
			return fail(agent.CodeToolError, fmt.Errorf("%w: stage %s: post-process: %v", ErrHook, st.def.Name, err))
		}
	}
	if outcome.IsTerminal() && outcome != agent.OutcomeTerminate {
		msg := firstText(output, "error", "message")
		return fail(agent.CodeToolError, fmt.Errorf("%w: stage %s reported outcome error: %s", ErrStageFailed, st.def.Name, msg))
	}
	rec.Outcome = outcome
	next, why, err := r.route(st, output, outcome)
	if err != nil {
		return fail(agent.CodeConfigError, err)
	}
	rec.Next = next
	rec.DurationMS = r.since(rec.StartedAt.Time)
	r.logf(ctx, slog.LevelDebug, "stage end", slog.String("stage", st.def.Name), slog.String("outcome", string(outcome)),
		slog.String("next", next), slog.String("route", why), slog.Float64("duration_ms", rec.DurationMS))
	env.History = append(env.History, rec)
	r.completed(rec)
	return r.settle(st.def.Name, output, outcome, next)
}

// begin starts a stage: its hop, its record, its agent_started event.
func (r *runState) begin(ctx context.Context, st *stage) StageRecord {
	env := r.env
	env.HopCount++
	rec := StageRecord{Stage: st.def.Name, Agent: st.name, Hop: env.HopCount, StartedAt: agent.Timestamp{Time: r.now()}}
	r.logf(ctx, slog.LevelDebug, "stage start", slog.String("stage", st.def.Name), slog.String("agent", st.name), slog.Int("hop", env.HopCount))
	r.emit(event.Event{Type: event.AgentStarted, Data: map[string]any{"stage": st.def.Name, "agent": st.name, "hop": env.HopCount}})
	return rec
}

// settle moves the run on after a completed stage: a clarify or confirm
// outcome pauses it, terminate ends it, anything else goes to next.
func (r *runState) settle(name string, output map[string]any, outcome agent.Outcome, next string) (bool, *Result, error) {
	env := r.env
	switch {
	case outcome == agent.OutcomeClarify, outcome == agent.OutcomeConfirm:
		q := firstText(output, "question", "message")
		env.Pending = &Pending{Stage: name, Outcome: outcome, Question: q, Output: output}
		env.Current = name
		res, err := r.finish(outcome, agent.ReasonAwaitingApproval, "", name, nil)
		return true, res, err
	case outcome.IsTerminal(): // terminate: an error failed the stage before
		env.Current = End
		res, err := r.finish(agent.OutcomeTerminate, agent.ReasonCompleted, "", name, nil)
		return true, res, err
	}
	env.Current = next
	return false, nil, nil
}

// firstText returns the first of keys whose value in m is a non-empty string.
func firstText(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, _ := m[k].(string); s != "" {
			return s
		}
	}
	return ""
}

// guard runs f and turns a panic in it (a hook's, say) into a
// *panicError, so that no panic escapes a run; the caller says whose.
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &panicError{p}
		}
	}()
	return f()
}

// panicError is a panic guard caught.
type panicError struct{ v any }

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.v) }

func (r *runState) completed(rec StageRecord) {
	r.emit(event.Event{Type: event.AgentCompleted, Data: map[string]any{"stage": rec.Stage, "agent": rec.Agent, "hop": rec.Hop,
		"status": string(rec.Outcome), "duration_ms": rec.DurationMS, "next": rec.Next, "error": rec.Error}})
	r.commit()
}

// process does a stage's main work: the mock, a plan, a service hook or
// the agent.
func (r *runState) process(ctx context.Context, st *stage, rec *StageRecord) (map[string]any, agent.Outcome, string, error) {
	switch {
	case r.p.mock && st.hooks.Mock != nil:
		out, err := st.hooks.Mock(ctx, r.env)
		if err == nil {
			out, err = hookOutput(out)
		}
		if err != nil {
			return nil, "", agent.CodeToolError, fmt.Errorf("%w: stage %s: mock: %v", ErrHook, st.def.Name, err)
		}
		return out, outcomeOf(out), "", nil
	case st.agent.Mode() == spec.ModePlan:
		planOut, ok := r.env.Outputs[st.def.PlanKey]
		if _, ok2 := planOut["steps"].([]any); !ok || !ok2 {
			return nil, "", agent.CodeValidation, fmt.Errorf("%w: stage %s: no plan at outputs.%s.steps", ErrStageFailed, st.def.Name, st.def.PlanKey)
		}
		return r.llm(ctx, st, rec)
	case st.agent.Mode() == spec.ModeService:
		if st.hooks.Work == nil {
			return map[string]any{}, agent.OutcomeSuccess, "", nil
		}
		sctx, end := r.serviceSpan(ctx, st)
		out, err := st.hooks.Work(sctx, r.env)
		if err == nil {
			out, err = hookOutput(out)
		}
		end(err)
		if err != nil {
			return nil, "", agent.CodeToolError, fmt.Errorf("%w: stage %s: service: %v", ErrHook, st.def.Name, err)
		}
		if out == nil {
			out = map[string]any{}
		}
		return out, outcomeOf(out), "", nil
	}
	return r.llm(ctx, st, rec)
}

// llm runs the stage's agent on the envelope: the raw input, the outputs
// so far by output key, and the user's answer when resuming.
func (r *runState) llm(ctx context.Context, st *stage, rec *StageRecord) (map[string]any, agent.Outcome, string, error) {
	input := r.stageInput(st, true)
	var res *agent.Result
	var runErr error
	if res = r.given; res != nil { // the stage's run, made elsewhere (Drive)
		r.given = nil
		if !res.Success && res.Error != nil {
			runErr = fmt.Errorf("%s: %s", res.Error.Code, res.Error.Message)
		} else if !res.Success {
			runErr = fmt.Errorf("the stage's run ended %s", res.TerminateReason)
		}
	} else {
		opts := append(slices.Clip(r.sessionOpts), agent.WithEventBus(r.bus), agent.WithParentRunID(r.runID))
		if r.set.Seed != nil {
			// Each hop its own seed: a stage visited again runs anew.
			opts = append(opts, agent.WithSeed(*r.set.Seed+int64(r.env.HopCount)))
		}
		sess, err := st.agent.NewSession(input, opts...)
		if err != nil {
			return nil, "", agent.CodeValidation, fmt.Errorf("%w: stage %s: %v", ErrStageFailed, st.def.Name, err)
		}
		res, runErr = sess.Run(ctx)
	}
	r.absorb(res)
	rec.RunID, rec.Tokens = res.ID, res.TokenUsage.TotalTokens
	if res.EstimatedCost != nil {
		rec.CostUSD = *res.EstimatedCost
	}
	if runErr != nil {
		code := agent.CodeInternal
		if res.Error != nil {
			code = res.Error.Code
		}
		return nil, "", code, fmt.Errorf("%w: stage %s: %v", ErrStageFailed, st.def.Name, runErr)
	}
	out, ok := res.Result.(map[string]any)
	if !ok {
		out = map[string]any{"text": res.Result}
	}
	return out, outcomeOf(out), "", nil
}

// outcomeOf reads the "outcome" a stage's output declares; success when
// it declares none.
func outcomeOf(out map[string]any) agent.Outcome {
	if s, ok := out["outcome"].(string); ok && agent.Outcome(s).Valid() {
		return agent.Outcome(s)
	}
	return agent.OutcomeSuccess
}

// route picks the next stage: replan and loop_back go back; otherwise the
// first routing rule whose output field equals its value, else
// default_next. A rule on a field the output lacks does not match: the
// next rule is tried.
func (r *runState) route(st *stage, out map[string]any, outcome agent.Outcome) (next, why string, err error) {
	if outcome.RequiresLoop() {
		return r.loop(st, out, outcome)
	}
	return r.forward(st, out)
}

// loop is where a replan or loop_back outcome sends the pipeline: the
// replan stage; the target the output names, the stage's loop_target, or
// the stage before.
func (r *runState) loop(st *stage, out map[string]any, outcome agent.Outcome) (next, why string, err error) {
	switch outcome {
	case agent.OutcomeReplan:
		return r.p.def.ReplanStage, "replan", nil
	case agent.OutcomeLoopBack:
		if t, ok := out["target"].(string); ok && t != "" {
			if _, exists := r.p.stages[t]; !exists {
				return "", "", fmt.Errorf("%w: stage %s: loop_back target %q does not exist", ErrRouting, st.def.Name, t)
			}
			return t, "loop_back target", nil
		}
		if st.def.LoopTarget != "" {
			return st.def.LoopTarget, "loop_target", nil
		}
		for i := len(r.env.History) - 1; i >= 0; i-- {
			if h := r.env.History[i].Stage; h != st.def.Name {
				return h, "loop_back to the stage before", nil
			}
		}
		return "", "", fmt.Errorf("%w: stage %s: loop_back with no earlier stage and no loop_target", ErrRouting, st.def.Name)
	}
	return "", "", fmt.Errorf("%w: stage %s: outcome %s does not loop", ErrRouting, st.def.Name, outcome)
}

// forward is the stage after st: the first routing rule whose output
// field equals its value, else default_next.
func (r *runState) forward(st *stage, out map[string]any) (next, why string, err error) {
	for i, rule := range st.def.RoutingRules {
		if v, ok := lookup(out, rule.Condition); ok && equal(v, rule.Value) {
			return rule.Target, fmt.Sprintf("routing_rules[%d] (%s)", i, rule.Condition), nil
		}
	}
	return st.def.DefaultNext, "default_next", nil
}

// absorb adds a stage agent's run to the pipeline's result.
func (r *runState) absorb(res *agent.Result) {
	t := &r.res.Result
	r.confs = append(r.confs, res.Confidence)
	t.TokenUsage.Add(res.TokenUsage)
	switch {
	case res.EstimatedCost == nil:
		r.unpriced = true
	case t.EstimatedCost == nil:
		c := *res.EstimatedCost
		t.EstimatedCost = &c
	default:
		*t.EstimatedCost += *res.EstimatedCost
	}
	t.ModelCalls = append(t.ModelCalls, res.ModelCalls...)
	for i := range t.ModelCalls[len(t.ModelCalls)-len(res.ModelCalls):] {
		mc := &t.ModelCalls[len(t.ModelCalls)-len(res.ModelCalls)+i]
		if mc.Agent == "" {
			mc.Agent = res.AgentName
		}
	}
	for _, s := range res.Steps {
		s.Step = len(t.Steps) + 1
		t.Steps = append(t.Steps, s)
	}
	for _, u := range res.ToolsUsed {
		if !slices.Contains(t.ToolsUsed, u) {
			t.ToolsUsed = append(t.ToolsUsed, u)
		}
	}
	for k, v := range res.Metrics.ToolLatencyMS {
		t.Metrics.ToolLatencyMS[k] += v
	}
	t.Metrics.ToolCalls += res.Metrics.ToolCalls
	t.Metrics.ToolErrors += res.Metrics.ToolErrors
	t.Metrics.ModelLatencyMS += res.Metrics.ModelLatencyMS
	if res.Model != "" {
		t.Model, t.Provider = res.Model, res.Provider
	}
}

func (r *runState) emit(e event.Event) {
	if !r.bus.Active() {
		return
	}
	e.RunID = r.runID
	e.AgentName = r.p.def.PipelineName
	e.Turn = r.env.HopCount
	e.TraceID = r.set.TraceID
	e.Time = r.now()
	r.p.red.Event(&e) // the input and the stages' outputs may hold secrets
	r.bus.Publish(e)
}

// costOf is a cost for event data: a number, or nil when unknown.
func costOf(c *float64) any {
	if c == nil {
		return nil
	}
	return *c
}

// hookOutput is what a Go hook or mock returned, as JSON values: typed
// slices, structs and numbers of any Go type become what routing rules
// and plans read ([]any, map[string]any, float64).
func hookOutput(out map[string]any) (map[string]any, error) {
	if out == nil || plainJSON(out) {
		return out, nil
	}
	m, err := jsonObject(out)
	if err != nil {
		return nil, fmt.Errorf("its output is not JSON: %v", err)
	}
	return m, nil
}

// logf writes a record of the run when the pipeline has a logger.
func (r *runState) logf(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if r.log != nil && r.log.Enabled(ctx, level) {
		r.log.LogAttrs(ctx, level, msg, attrs...)
	}
}

// name gives the run its id (the one given, a seeded one, or a new
// one) and its envelope an id when it has none.
func (r *runState) name(given string) {
	var seed int64
	if r.set.Seed != nil {
		seed = seedOf(*r.set.Seed, r.p, r.env)
	}
	switch {
	case given != "":
		r.runID = given
	case r.set.Seed != nil:
		r.runID = ids.Seeded("run", seed)
	default:
		r.runID = ids.New("run")
	}
	if r.env.ID == "" {
		r.env.ID = ids.New("env")
		if r.set.Seed != nil {
			r.env.ID = ids.Seeded("env", seed)
		}
	}
}

// seedOf is what a seeded pipeline run's ids derive from: the seed, the
// pipeline and the envelope's input, as for an agent's run.
func seedOf(seed int64, p *Pipeline, env *Envelope) int64 {
	in, _ := json.Marshal(env.RawInput)
	return ids.Derive(seed, p.def.PipelineName, p.def.Version, string(in))
}
