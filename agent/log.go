package agent

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
)

// runLogger writes a run's slog records: run start and end (info), each
// turn, model call and tool call (debug), retries (warn) and failures
// (warn for a failed call, error for a failed run or a panic). Each
// record carries the agent, its version, the run, user, correlation and
// trace ids (and the run's span id when it is traced) and the turn. Nothing is built when the level is off.
type runLogger struct {
	r    *run // its logger is the session's agent's
	base []slog.Attr
}

var discard = slog.New(slog.DiscardHandler)

func (g *runLogger) on(level slog.Level) bool { return g.r.s.agent.logger.Enabled(g.r.ctx, level) }

func (g *runLogger) emit(level slog.Level, msg string, attrs ...slog.Attr) {
	if g.r.st.Turn < g.r.quiet() {
		return // a resumed run replays these turns: they were logged when they ran
	}
	if g.base == nil {
		st, info := g.r.st, g.r.info
		g.base = []slog.Attr{slog.String("agent", st.AgentName), slog.String("agent_version", st.AgentVersion),
			slog.String("run_id", st.RunID)}
		if st.ParentRunID != "" {
			g.base = append(g.base, slog.String("parent_run_id", st.ParentRunID))
		}
		if info != nil {
			for _, kv := range [][2]string{{"user_id", info.UserID}, {"correlation_id", info.CorrelationID}, {"trace_id", info.TraceID}} {
				if kv[1] != "" {
					g.base = append(g.base, slog.String(kv[0], kv[1]))
				}
			}
		}
		if o := g.r.otel; o != nil && o.span.SpanContext().HasSpanID() {
			g.base = append(g.base, slog.String("span_id", o.span.SpanContext().SpanID().String()))
		}
	}
	all := make([]slog.Attr, 0, len(g.base)+1+len(attrs))
	all = append(all, g.base...)
	all = append(all, slog.Int("turn", g.r.st.Turn))
	// The run's context carries the caller's values: a handler reads its trace ids.
	g.r.s.agent.logger.LogAttrs(g.r.ctx, level, msg, append(all, attrs...)...)
}

func (g *runLogger) runStart() {
	if g.on(slog.LevelInfo) {
		a := g.r.a
		g.emit(slog.LevelInfo, "run start", slog.String("mode", string(a.spec.Mode)), slog.String("model", a.modelName),
			slog.String("provider", a.providerName))
	}
}

func (g *runLogger) runEnd(res *Result) {
	level := slog.LevelInfo
	if res.Error != nil && res.Outcome == OutcomeError {
		level = slog.LevelError
	} else if res.Error != nil {
		level = slog.LevelWarn
	}
	if !g.on(level) {
		return
	}
	attrs := []slog.Attr{slog.Bool("success", res.Success), slog.String("terminate_reason", string(res.TerminateReason)),
		slog.String("outcome", string(res.Outcome)), slog.Int("turns", res.Iterations), slog.Int("total_tokens", res.TokenUsage.TotalTokens),
		slog.Float64("duration_ms", res.Metrics.DurationMS)}
	if res.EstimatedCost != nil {
		attrs = append(attrs, slog.Float64("cost_usd", *res.EstimatedCost))
	}
	if res.Error != nil {
		attrs = append(attrs, slog.String("code", res.Error.Code), slog.String("error", res.Error.Message))
	}
	g.emit(level, "run end", attrs...)
}

func (g *runLogger) turnStart() {
	if g.on(slog.LevelDebug) {
		g.emit(slog.LevelDebug, "turn start")
	}
}

func (g *runLogger) modelCall(mc *ModelCall, err error) {
	level := slog.LevelDebug
	if err != nil {
		level = slog.LevelWarn
	}
	if !g.on(level) {
		return
	}
	attrs := []slog.Attr{slog.String("provider", mc.Provider), slog.String("model", mc.Model), slog.Int("prompt_tokens", mc.PromptTokens),
		slog.Int("completion_tokens", mc.CompletionTokens), slog.Float64("duration_ms", mc.DurationMS), slog.Int("attempts", mc.Attempts)}
	if err != nil {
		attrs = append(attrs, slog.String("error", g.clean(err.Error())))
	}
	g.emit(level, "model call", attrs...)
}

func (g *runLogger) toolCall(res *ToolResult, n int) {
	level := slog.LevelDebug
	if res.Err != nil {
		level = slog.LevelWarn
	}
	if !g.on(level) {
		return
	}
	attrs := []slog.Attr{slog.String("tool", res.Call.Name), slog.String("call_id", res.Call.ID), slog.Int("call", n),
		slog.Float64("duration_ms", ms(res.Duration))}
	if res.Err != nil {
		attrs = append(attrs, slog.String("error", g.clean(res.Err.Error())))
	}
	g.emit(level, "tool call", attrs...)
}

// logCap is how much of a thought, an input or an observation a debug
// record carries.
const logCap = 1 << 10

// step logs one step of the trace (debug): its thought, its action and
// what it observed, redacted and capped, so that a person can follow the
// reasoning in the logs alone.
func (g *runLogger) step(rec *stepRec) {
	if !g.on(slog.LevelDebug) {
		return
	}
	attrs := make([]slog.Attr, 0, 5)
	if rec.thought != "" {
		attrs = append(attrs, slog.String("thought", truncate(g.clean(rec.thought), logCap)))
	}
	obs := rec.obs
	if rec.call != nil {
		input := string(rec.call.Arguments)
		if g.r.s.agent.private(rec.call.Name) {
			input, obs = policy.Private(input), policy.Private(obs)
		}
		attrs = append(attrs, slog.String("action", rec.call.Name), slog.String("input", truncate(g.clean(input), logCap)))
	}
	if obs != "" {
		attrs = append(attrs, slog.String("observation", truncate(g.clean(obs), logCap)))
	}
	if m := rec.more; m != nil {
		switch {
		case m.parseError != "":
			attrs = append(attrs, slog.String("parse_error", g.clean(m.parseError)))
		case m.finalAnswer != "":
			attrs = append(attrs, slog.String("final_answer", truncate(g.clean(m.finalAnswer), logCap)))
		}
	}
	g.emit(slog.LevelDebug, "step", attrs...)
}

func (g *runLogger) retry(attempt int, wait time.Duration, err error) {
	if g.on(slog.LevelWarn) {
		g.emit(slog.LevelWarn, "model call retry", slog.Int("attempt", attempt), slog.Duration("wait", wait), slog.String("error", g.clean(err.Error())))
	}
}

func (g *runLogger) fallback(info llm.FallbackInfo) {
	if g.on(slog.LevelWarn) {
		g.emit(slog.LevelWarn, "model fallback", slog.String("from", info.FromProvider+":"+info.FromModel),
			slog.String("to", info.ToProvider+":"+info.ToModel), slog.String("error", g.clean(info.Err.Error())))
	}
}

// clean redacts secrets from text a record carries.
func (g *runLogger) clean(s string) string { return g.r.a.redact.String(s) }

// panicked logs a recovered panic with its stack; a nil stack is taken
// here, which works while the deferred recover is still running.
func (g *runLogger) panicked(what string, p, stack any) {
	if g.on(slog.LevelError) {
		if stack == nil {
			stack = string(debug.Stack())
		}
		g.emit(slog.LevelError, what+" panicked", slog.String("panic", g.clean(fmt.Sprint(p))), slog.String("stack", g.clean(fmt.Sprint(stack))))
	}
}
