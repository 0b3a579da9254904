package pipeline

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/journal"
)

// finish completes the result of every ending and emits run_end.
func (r *runState) finish(outcome agent.Outcome, reason agent.TerminateReason, code, stageName string, err error) (*Result, error) {
	t := &r.res.Result
	now := r.now()
	t.FinishedAt = agent.Timestamp{Time: now}
	t.Metrics.DurationMS = journal.Millis(now.Sub(r.start))
	t.Iterations = r.env.HopCount
	t.Outcome, t.TerminateReason = outcome, reason
	if r.log != nil {
		level := slog.LevelInfo
		if err != nil {
			level = slog.LevelError
		}
		r.logf(r.ctx, level, "pipeline end", slog.String("outcome", string(outcome)), slog.String("terminate_reason", string(reason)),
			slog.Int("hops", r.env.HopCount), slog.Float64("duration_ms", t.Metrics.DurationMS))
	}
	t.Success = err == nil && (outcome.IsSuccess() || outcome == agent.OutcomeTerminate)
	if r.last != nil {
		t.Result = r.last
		if b, e := json.Marshal(r.last); e == nil {
			t.RawContent = string(b)
		}
	}
	if err != nil {
		t.Error = &agent.ErrorInfo{Code: code, Message: err.Error(), Details: map[string]any{"stage": stageName}}
	}
	if r.unpriced {
		t.EstimatedCost = nil
	} else if t.EstimatedCost == nil {
		zero := 0.0
		t.EstimatedCost = &zero
	}
	t.Decision = r.decision()
	t.Confidence = confidence(t.Success, outcome, r.confs)
	data := map[string]any{"success": t.Success, "outcome": string(outcome), "terminate_reason": string(reason),
		"total_tokens": t.TokenUsage.TotalTokens, "cost_usd": costOf(t.EstimatedCost), "duration_ms": t.Metrics.DurationMS, "hops": r.env.HopCount}
	e := event.Event{Type: event.RunEnd, Data: data}
	if p := r.env.Pending; p != nil {
		data["question"] = p.Question
		data["stage"] = p.Stage
	}
	if t.Error != nil {
		e.Error = &event.ErrorInfo{Code: t.Error.Code, Message: t.Error.Message}
	}
	r.emit(e)
	r.endSpan(t)
	r.redact()
	if serr := r.closeStore(); serr != nil && err == nil {
		err = serr
	}
	return r.res, err
}

// redact redacts the Result, envelope included, before anyone sees or
// stores it: the raw input and the stages' outputs may hold secrets.
// The stage agents' own Results are redacted already.
func (r *runState) redact() {
	b, err := json.Marshal(r.res)
	if err != nil {
		return
	}
	out := r.p.red.Bytes(b)
	if string(out) == string(b) {
		return
	}
	var clean Result
	if json.Unmarshal(out, &clean) == nil {
		*r.res = clean
	}
}

// confidence of a pipeline run: the mean of its agent stages' confidences
// (0.9 when no stage ran a model), capped at 0.3 when it did not reach its
// end, and 0 when it failed.
func confidence(success bool, outcome agent.Outcome, confs []float64) float64 {
	if outcome == agent.OutcomeError {
		return 0
	}
	c := 0.9
	if len(confs) > 0 {
		sum := 0.0
		for _, x := range confs {
			sum += x
		}
		c = sum / float64(len(confs))
	}
	if !success {
		c = min(c, 0.3)
	}
	return float64(int(c*100+0.5)) / 100
}

func (r *runState) decision() string {
	var path []string
	for _, h := range r.env.History {
		path = append(path, fmt.Sprintf("%s (%s)", h.Stage, h.Outcome))
	}
	s := "Stages: " + joinOr(path, "none")
	if p := r.env.Pending; p != nil {
		s += fmt.Sprintf("; waiting at %s for the user (%s)", p.Stage, p.Outcome)
	}
	return s
}

func joinOr(parts []string, empty string) string {
	if len(parts) == 0 {
		return empty
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += " → " + p
	}
	return out
}
