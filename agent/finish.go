package agent

import (
	"strconv"
	"strings"
	"time"

	"github.com/agentry/agentry/event"
)

// finish builds the Result of every ending and emits run_end.
func (r *run) finish(o outcome, err error) (*Result, error) {
	r.link.merge(r)
	st, a := r.st, r.a
	now := time.Now()
	res := &Result{
		ID: st.RunID, SessionID: st.SessionID, AgentName: st.AgentName, AgentVersion: st.AgentVersion,
		Success: err == nil, TerminateReason: o.reason, RawContent: st.LastContent,
		StartedAt: st.StartedAt, FinishedAt: Timestamp{now}, Iterations: st.Turn,
		Steps: st.Steps, Messages: st.Messages, ToolsUsed: st.ToolsUsed, TokenUsage: st.Usage,
		EstimatedCost: st.CostUSD, Model: a.model, Provider: a.providerName, ModelCalls: st.ModelCalls,
		Metrics: Metrics{DurationMS: ms(now.Sub(st.StartedAt.Time)), ModelLatencyMS: st.ModelLatencyMS,
			ToolLatencyMS: st.ToolLatencyMS, ToolCalls: st.ToolCalls, ToolErrors: st.ToolErrors},
	}
	if st.Model != "" {
		res.Model = st.Model
	}
	if st.Provider != "" {
		res.Provider = st.Provider
	}
	if res.Steps == nil {
		res.Steps = []Step{}
	}
	if res.ToolsUsed == nil {
		res.ToolsUsed = []string{}
	}
	if res.ModelCalls == nil {
		res.ModelCalls = []ModelCall{}
	}
	if a.prompt != nil && o.reason == ReasonCompleted {
		v := r.validated
		res.Validated = &v
	}
	switch {
	case err == nil && o.output != nil:
		res.Outcome, res.Result = OutcomeSuccess, o.output
	case err == nil:
		res.Outcome, res.Result = OutcomeSuccess, o.content
	case o.reason == ReasonError:
		res.Outcome = OutcomeError
	default:
		res.Outcome = OutcomePartial
		if st.LastContent != "" {
			res.Result = st.LastContent
		}
	}
	if err != nil {
		res.Error = &ErrorInfo{Code: o.code, Message: err.Error(), Details: o.details,
			Recoverable: o.reason != ReasonError && o.reason != ReasonAborted}
		if rec, ok := o.details["recoverable"].(bool); ok {
			res.Error.Recoverable = rec
			delete(o.details, "recoverable")
		}
	}
	res.Confidence = confidence(res)
	res.Decision = decision(res)
	if r.s.bus.Active() {
		e := event.Event{Type: event.RunEnd, Content: st.LastContent, Data: map[string]any{
			"success": res.Success, "terminate_reason": string(res.TerminateReason), "outcome": string(res.Outcome),
			"total_tokens": res.TokenUsage.TotalTokens, "cost_usd": res.EstimatedCost, "duration_ms": res.Metrics.DurationMS}}
		if res.Error != nil {
			e.Error = &event.ErrorInfo{Code: res.Error.Code, Message: res.Error.Message}
		}
		r.emit(e)
	}
	return res, err
}

// confidence scores a run from 0 to 1 with the heuristic of docs/agents.md:
// a completed run starts at 0.9; every tool call that failed costs up to
// 0.3 in proportion; turns beyond three cost 0.05 each (at most 0.3); a run
// that did not complete is capped at 0.3, one that failed outright is 0.
func confidence(res *Result) float64 {
	if res.Outcome == OutcomeError {
		return 0
	}
	c := 0.9
	if n := res.Metrics.ToolCalls; n > 0 {
		c -= 0.3 * float64(res.Metrics.ToolErrors) / float64(n)
	}
	if extra := res.Iterations - 3; extra > 0 {
		c -= min(0.05*float64(extra), 0.3)
	}
	if !res.Success {
		c = min(c, 0.3)
	}
	return max(0, min(1, float64(int(c*100+0.5))/100))
}

// decision summarises the run in one readable line.
func decision(res *Result) string {
	var b strings.Builder
	b.Grow(256)
	if len(res.Steps) > 0 {
		b.WriteString("Called ")
		for i, s := range res.Steps {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(s.Action.Tool)
			if s.Action.Error != "" {
				b.WriteString(" (failed)")
			}
		}
		b.WriteString(" over ")
	} else {
		b.WriteString("No tool calls in ")
	}
	b.WriteString(strconv.Itoa(res.Iterations))
	b.WriteString(" turns; ")
	if res.Success {
		b.WriteString("answered: ")
		b.WriteString(truncate(res.RawContent, 160))
	} else {
		b.WriteString("stopped (")
		b.WriteString(string(res.TerminateReason))
		b.WriteString(")")
		if res.Error != nil {
			b.WriteString(": ")
			b.WriteString(truncate(res.Error.Message, 160))
		}
	}
	return b.String()
}

// truncate shortens s to about n bytes on one line.
func truncate(s string, n int) string {
	if strings.ContainsAny(s, "\n\r\t") {
		s = strings.Join(strings.Fields(s), " ")
	}
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
