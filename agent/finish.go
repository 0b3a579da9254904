package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/react"
	"github.com/agentry/agentry/tool"
)

// finish builds the Result of every ending and emits run_end.
func (r *run) finish(final *Final, err error) (*Result, error) {
	if final != nil && err == nil && r.a.outFilters != nil {
		final, err = r.filterOutput(final) // the policy's filters on the output
	}
	if final != nil && err == nil {
		err = r.memorize(final)
	}
	r.link.merge(r)
	r.trace.build(r.st, r.s.agent, r.runStart)
	st, a := r.st, r.a
	end := endingOf(err)
	now := r.now()
	res := &Result{
		ID: st.RunID, SessionID: st.SessionID, AgentName: st.AgentName, AgentVersion: st.AgentVersion,
		Success: err == nil, Outcome: end.outcome, TerminateReason: end.reason, RawContent: st.LastContent, OutputName: a.spec.OutputName,
		StartedAt: st.StartedAt, FinishedAt: Timestamp{now}, Iterations: st.Turn,
		Steps: st.Steps, Messages: st.Messages, ToolsUsed: st.ToolsUsed, TokenUsage: st.Usage,
		Model: a.model, Provider: a.providerName, ModelCalls: st.ModelCalls,
		Metrics: Metrics{DurationMS: ms(now.Sub(st.StartedAt.Time)), ModelLatencyMS: st.ModelLatencyMS,
			ToolLatencyMS: st.ToolLatencyMS, ToolCalls: st.ToolCalls, ToolErrors: st.ToolErrors},
	}
	if !r.unpriced {
		res.cost = st.CostUSD
		res.EstimatedCost = &res.cost // in the Result itself: no allocation of its own
	}
	res.Model, res.Provider = cmp.Or(st.Model, res.Model), cmp.Or(st.Provider, res.Provider)
	res.noNilLists()
	if a.prompt != nil && end.reason == ReasonCompleted {
		v := r.validated
		res.Validated = &v
	}
	switch {
	case final != nil && err == nil && final.Output != nil:
		res.Result = final.Output
	case final != nil && err == nil:
		res.Result = final.Text
	case end.outcome == OutcomePartial && st.LastContent != "":
		res.Result = st.LastContent
	}
	if final != nil && final.Text != "" && r.st.LastContent == "" {
		res.RawContent = final.Text
	}
	res.setError(err, end)
	r.describe(res)
	if _, ok := st.Input["constraints"]; ok && err == nil {
		c, _ := constraintsOf(st.Input)
		err = checkQuality(res, c.quality)
	}
	r.hidePrivate(res)
	redactResult(res, a.redact, r.cleanHistory())
	res.Decision = decision(res) // of redacted parts: it needs no redaction of its own
	paused := errors.Is(err, ErrInterrupted) || errors.Is(err, drive.ErrDispatched)
	if !errors.Is(err, drive.ErrDispatched) { // a run that handed its calls out goes on elsewhere
		a.metrics.record(res)
		r.logger.runEnd(res)
	}
	r.endSpan(res)
	r.s.agent.sizes.learn(st)
	// An interrupted run has not ended: its run_end comes when it is
	// resumed and ends, so that a stream of its events goes on then.
	if r.s.bus.Active() && !paused {
		r.emitEnd(res)
	}
	return res, redactErr(err, a.redact)
}

// promptTemplate names the versioned template the run's prompt came
// from: the system prompt's (prompt_ref), or the ReAct one.
func (r *run) promptTemplate() string {
	a := r.a
	var ref string
	if _, ok := r.planner.(reactPlanner); ok {
		v := a.spec.ReActTemplate
		if v == "" {
			v = react.TemplateVersion
		}
		ref = "react/" + v
		if a.reactTpl != nil {
			ref = a.reactTpl.Ref()
		}
	}
	if a.sysTpl != nil {
		ref = a.sysTpl.Ref() // the provenance of the system prompt
	}
	return ref
}

// confidence scores a run from 0 to 1 (docs/react.md): a completed run
// starts at 0.9; failed tool calls cost up to 0.3 in proportion; each turn
// beyond three costs 0.05 (at most 0.3); each unusable reply 0.1 (at most
// 0.3); each contradiction 0.1; each risk a tool reported 0.05 (at most
// 0.2); the lowest source quality adds 0.05 (high), 0 (medium), -0.05
// (unknown) or -0.15 (low); a numeric "confidence" in the output is
// averaged in. A run that did not complete is capped at 0.3; one that
// failed is 0.
var noReasoning reasoning // what a run without ReAct or hints reads

func confidence(res *Result, rs *reasoning) float64 {
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
	c -= min(0.1*float64(res.Metrics.ParseErrors), 0.3)
	c -= 0.1 * float64(rs.contradictions)
	c -= min(0.05*float64(len(rs.risks)), 0.2)
	switch rs.sourceQuality {
	case "high":
		c += 0.05
	case "unknown":
		c -= 0.05
	case "low":
		c -= 0.15
	}
	if out, ok := res.Result.(map[string]any); ok {
		if v, ok := out["confidence"]; ok {
			if f, err := strconv.ParseFloat(fmt.Sprint(v), 64); err == nil && f >= 0 && f <= 1 {
				c = (c + f) / 2
			}
		}
	}
	if !res.Success {
		c = min(c, 0.3)
	}
	return max(0, min(1, float64(int(c*100+0.5))/100))
}

// contextUsed lists what the run had to go on: the input's keys and the
// tools whose results it saw.
func (a *Agent) contextUsed(st *State) []string {
	if len(st.Input)+len(st.ToolsUsed) == 0 {
		return nil
	}
	out := make([]string, 0, len(st.Input)+len(st.ToolsUsed))
	for k := range st.Input {
		label, ok := a.inputLabels[k]
		if !ok {
			label = "input:" + k
		}
		out = append(out, label)
	}
	slices.Sort(out) // as the keys sort: the prefix is the same
	for _, t := range st.ToolsUsed {
		if b := a.table().byName[t]; b != nil && b.label != "" {
			out = append(out, b.label)
		} else {
			out = append(out, "tool:"+t)
		}
	}
	return out
}

// decision summarises the run in one readable line (Noema's decision):
// what it called, the reasoning that led to the answer (its first and
// last thoughts), what the last successful calls found, and how it ended.
func decision(res *Result) string {
	var b strings.Builder
	b.Grow(256)
	called := 0
	for _, s := range res.Steps {
		if s.Action == nil {
			continue
		}
		if called == 0 {
			b.WriteString("Called ")
		} else {
			b.WriteString(", ")
		}
		called++
		b.WriteString(s.Action.Tool)
		switch {
		case s.Action.Error != "":
			b.WriteString(" (failed)")
		case s.Action.Cached:
			b.WriteString(" (cached)")
		}
	}
	if called > 0 {
		b.WriteString(" over ")
	} else {
		b.WriteString("No tool calls in ")
	}
	b.WriteString(strconv.Itoa(res.Iterations))
	b.WriteString(" turns; ")
	writeReasoning(&b, res.Steps)
	if n := res.Metrics.ParseErrors; n > 0 {
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" unusable replies; ")
	}
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

// writeReasoning adds the key thoughts (the first and the last, when they
// differ) and the findings of the last two successful calls.
func writeReasoning(b *strings.Builder, steps []Step) {
	first, last := "", ""
	for i := range steps {
		if t := steps[i].Thought; t != "" {
			if first == "" {
				first = t
			}
			last = t
		}
	}
	if first != "" {
		b.WriteString("reasoning: \"")
		b.WriteString(truncate(first, 120))
		if last != first {
			b.WriteString("\" … \"")
			b.WriteString(truncate(last, 120))
		}
		b.WriteString("\"; ")
	}
	var found [2]*Step
	n := 0
	for i := len(steps) - 1; i >= 0 && n < len(found); i-- {
		if a := steps[i].Action; a != nil && a.Error == "" && steps[i].Observation != "" {
			found[n] = &steps[i]
			n++
		}
	}
	if n == 0 {
		return
	}
	b.WriteString("found: ")
	for i := n - 1; i >= 0; i-- {
		b.WriteString(found[i].Action.Tool)
		b.WriteString(" → ")
		b.WriteString(truncate(found[i].Observation, 80))
		if i > 0 {
			b.WriteString(", ")
		}
	}
	b.WriteString("; ")
}

// emitEnd emits run_end with what the Result says of the run.
func (r *run) emitEnd(res *Result) {
	e := event.Event{Type: event.RunEnd, Content: r.st.LastContent, Data: map[string]any{
		"success": res.Success, "terminate_reason": string(res.TerminateReason), "outcome": string(res.Outcome),
		"total_tokens": res.TokenUsage.TotalTokens, "cost_usd": costValue(res.EstimatedCost), "duration_ms": res.Metrics.DurationMS}}
	if res.Error != nil {
		e.Error = &event.ErrorInfo{Code: res.Error.Code, Message: res.Error.Message}
	}
	r.emit(e)
}

// describe adds to a Result what the run knows beside its trace: the
// reasoning's findings, provenance, notes, ids and the confidence.
func (r *run) describe(res *Result) {
	st := r.st
	rs := r.reasoning
	if rs == nil {
		rs = &noReasoning
	}
	// "Use estimatedImpact for prioritization": the alternatives most
	// impact first, ties in the order the tools gave them.
	slices.SortStableFunc(rs.alternatives, func(a, b tool.Alternative) int { return cmp.Compare(b.EstimatedImpact, a.EstimatedImpact) })
	res.SourceQuality, res.AssumptionsMade, res.Alternatives = rs.sourceQuality, rs.assumptions, rs.alternatives
	res.Metrics.ParseErrors = st.ParseErrors
	res.PromptTemplate = r.promptTemplate()
	res.TraceID = r.info.TraceID
	r.addNotes(res)
	if j := r.link.journal; j != nil && j.w != nil {
		res.TraceRef = res.ID
	}
	if e := r.s.cfg.extra; e != nil && e.seeded {
		seed := e.seed
		res.Seed, res.Deterministic = &seed, r.fixed
	}
	res.ContextUsed = r.a.contextUsed(st)
	res.Handoffs = st.Handoffs
	res.MemoryDeltas = r.mem.result()
	res.Confidence = confidence(res, rs)
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

// costValue is a cost for event data: a number, or nil when unknown.
func costValue(c *float64) any {
	if c == nil {
		return nil
	}
	return *c
}

// noNilLists makes the Result's lists empty rather than null in JSON.
func (res *Result) noNilLists() {
	if res.Steps == nil {
		res.Steps = []Step{}
	}
	if res.ToolsUsed == nil {
		res.ToolsUsed = []string{}
	}
	if res.ModelCalls == nil {
		res.ModelCalls = []ModelCall{}
	}
}

// setError gives the Result the error the run ended with, as the ending
// table says, and the calls it waits on when it paused for them.
func (res *Result) setError(err error, end ending) {
	if err == nil {
		return
	}
	res.Error = &ErrorInfo{Code: end.code, Message: err.Error(), Details: detailsOf(err), Recoverable: end.recoverable}
	if ae := (*awaitingError)(nil); errors.As(err, &ae) {
		res.Waiting = ae.waitingCalls()
	}
}
