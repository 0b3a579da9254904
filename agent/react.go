package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/react"
	"github.com/agentry/agentry/tool"
)

// reasoning gathers what the Noema trace adds to a result.
type reasoning struct {
	sourceQuality  string // the lowest seen
	risks          []string
	alternatives   []tool.Alternative
	assumptions    []string
	contradictions int
	seen           map[string]string    // ReAct: tool call -> output, to spot contradictions
	notes          []string             // what the ReAct parser forgave in the last reply
	byTool         map[string]toolHints // what each tool's last result said of its order (schedule)
}

// why is the run's reasoning, made when something first adds to it: most
// runs have none, and a paused session keeps only what it has.
func (r *run) why() *reasoning {
	if r.reasoning == nil {
		r.reasoning = &reasoning{}
	}
	return r.reasoning
}

var qualityRank = map[string]int{"high": 3, "medium": 2, "unknown": 1, "low": 0}

// noteHints folds a tool's hints into the run's reasoning.
func (r *run) noteHints(name string, h *tool.Hints) {
	rs := r.why()
	rs.learn(name, h)
	q := strings.ToLower(h.SourceQuality)
	if _, ok := qualityRank[q]; ok {
		if cur := rs.sourceQuality; cur == "" || qualityRank[q] < qualityRank[cur] {
			rs.sourceQuality = q
		}
	}
	for _, risk := range h.RiskFactors {
		if !slices.Contains(rs.risks, risk) {
			rs.risks = append(rs.risks, risk)
		}
	}
	rs.alternatives = append(rs.alternatives, h.Alternatives...)
}

// reactMessages renders the Noema system prompt for input.
func reactMessages(a *Agent, input map[string]any) ([]llm.Message, []string) {
	var probs []string
	render := func(field, text string) string {
		out, err := prompt.Render(field, text, input)
		if err != nil {
			probs = append(probs, err.Error())
		}
		return out
	}
	system, err := a.systemText(input)
	if err != nil {
		probs = append(probs, err.Error())
	}
	d := react.PromptData{
		Role:         a.spec.Description,
		Capabilities: render("purpose_text", a.spec.PurposeText),
		Task:         render("user_text", a.spec.UserText),
		MaxTurns:     a.limits.MaxTurns,
		BudgetUSD:    a.limits.MaxCostUSD,
	}
	if d.Role == "" {
		d.Role = "the " + a.spec.AgentName + " agent"
	}
	if d.Task == "" {
		d.Task = prompt.InputLines(input, a.spec.InputKeys)
	}
	if a.limits.TimeoutMS > 0 {
		d.Timeout = (time.Duration(a.limits.TimeoutMS) * time.Millisecond).String()
	}
	for _, ts := range a.table().specs {
		// A description's later lines (its example arguments) indent
		// under its tool, as its parameters do.
		desc := strings.ReplaceAll(ts.Description, "\n", "\n  ")
		d.Tools = append(d.Tools, react.Tool{Name: ts.Name, Description: desc, Parameters: compactSchema(ts.Parameters)})
	}
	if a.fewShot() {
		for _, ex := range a.spec.FewShot {
			d.Examples = append(d.Examples, fewShot(ex))
		}
		d.Examples = append(d.Examples, a.reactExamples()...)
	}
	if len(a.spec.OutputSchema) > 0 {
		d.OutputSchema = compactSchema(a.spec.OutputSchema)
	}
	var text string
	if a.reactTpl != nil {
		text, err = react.Render(a.reactTpl, d)
	} else {
		text, err = react.SystemPrompt(a.spec.ReActTemplate, d)
	}
	if err != nil {
		probs = append(probs, err.Error())
	}
	if system != "" {
		text = system + "\n\n" + text
	}
	msgs := make([]llm.Message, 0, 2+2*min(a.limits.MaxTurns, 16))
	return append(msgs, llm.Message{Role: llm.RoleSystem, Content: text}, llm.Message{Role: llm.RoleUser, Content: "Begin."}), probs
}

// compactSchema shows a schema on one line, without $schema.
func compactSchema(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return string(raw)
	}
	delete(m, "$schema")
	b, _ := json.Marshal(m)
	return string(b)
}

// fewShot renders one example: a string as it is; an object with "input"
// and "output" as a task and the reply that answers it.
func fewShot(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var ex struct {
		Input  any    `json:"input"`
		Output string `json:"output"`
	}
	if json.Unmarshal(raw, &ex) == nil && ex.Output != "" {
		in, ok := ex.Input.(string)
		if !ok {
			b, _ := json.Marshal(ex.Input)
			in = string(b)
		}
		return "Task: " + in + "\n" + ex.Output
	}
	return string(raw)
}

// reactStop ends a ReAct reply before the model writes an observation.
var reactStop = []string{react.Stop}

// reactPlanner is the text ReAct loop: each reply is parsed; a parse error
// becomes an observation that tells the model what was wrong; an action
// is one tool call whose observation goes back as text; a final answer
// ends the run once valid.
type reactPlanner struct{}

func (reactPlanner) Next(ctx context.Context, t *Turn) (Decision, error) {
	resp, err := t.Generate(ctx)
	if err != nil {
		return Decision{}, err
	}
	r := t.r
	st := r.st
	reply, perr := react.Parse(resp.Content)
	r.noteAssumptions(reply.Thought)
	if perr != nil {
		problem := perr.(*react.ParseError).Problem
		st.ParseErrors++
		obs := react.ParseErrorObservation(problem)
		rec := r.trace.step(r.since(r.runStart, time.Now()), st.Turn, reply.Thought, nil, &stepMore{parseError: problem})
		rec.obs = obs
		r.logger.step(rec)
		if r.s.bus.Active() {
			r.emit(event.Event{Type: event.Error, Error: &event.ErrorInfo{Code: CodeParseError, Message: problem}})
		}
		return Decision{Message: &llm.Message{Role: llm.RoleUser, Content: "Observation: " + obs}}, nil
	}
	if reply.Final {
		if reply.Thought != "" && r.s.bus.Active() {
			r.emit(event.Event{Type: event.Thinking, Content: reply.Thought})
		}
		r.logger.step(r.trace.step(r.since(r.runStart, time.Now()), st.Turn, reply.Thought, nil, &stepMore{finalAnswer: reply.Answer}))
		st.LastContent = reply.Answer
		d := t.Answer(reply.Answer)
		if d.Final != nil && d.Final.Output == nil && d.Final.Err == nil && r.a.prompt == nil {
			d.Final.Output = finalJSON(reply.Answer) // "parsed as JSON if possible"
		}
		if d.Message != nil {
			// A correction: ReAct wants it as an observation.
			d.Message.Content = "Observation: " + d.Message.Content + "\nGive the corrected Final Answer."
		}
		return d, nil
	}
	if len(reply.Notes) > 0 || r.reasoning != nil {
		r.why().notes = reply.Notes
	}
	call := llm.ToolCall{ID: "react_" + strconv.Itoa(st.Turn), Name: reply.Action, Arguments: reply.Input}
	return CallTools(reply.Thought, call), nil
}

// Observe shows a call's result as an "Observation:" line, with the
// tool's hints and what the parser forgave.
func (reactPlanner) Observe(t *Turn, results []ToolResult) {
	r := t.r
	rs := r.why()
	for i := range results {
		res := &results[i]
		r.checkContradiction(rs, res)
		r.st.Messages = append(r.st.Messages, llm.Message{Role: llm.RoleUser,
			Content: "Observation: " + reactObservation(res.Observation, res.Hints, rs.notes)})
	}
	rs.notes = nil
}

// reactObservation is what the model sees of a call: its output, then the
// tool's hints and what the parser forgave.
func reactObservation(obs string, h *tool.Hints, notes []string) string {
	var b strings.Builder
	b.WriteString(obs)
	if h != nil {
		if s := h.String(); s != "" {
			b.WriteString("\nHints: ")
			b.WriteString(s)
		}
	}
	for _, n := range notes {
		b.WriteString("\nNote: ")
		b.WriteString(n)
	}
	return b.String()
}

// checkContradiction counts a read that answered the same question two
// ways with no write between: a call of a safe (read-only) tool whose
// output differs from the same call's before. Any other call may change
// what the reads see, so it forgets them (a get, set, get is no
// contradiction).
func (r *run) checkContradiction(rs *reasoning, res *ToolResult) {
	b := r.a.table().byName[res.Call.Name]
	if b == nil {
		return // no such tool: nothing ran
	}
	if b.info.Idempotency != tool.Safe {
		clear(rs.seen) // a write, or a call that may have been one
		return
	}
	if res.Err != nil || res.Cached {
		return
	}
	if rs.seen == nil {
		rs.seen = map[string]string{}
	}
	key := res.Call.Name + "\x00" + string(res.Call.Arguments)
	out := string(res.Output)
	if prev, ok := rs.seen[key]; ok && prev != out {
		rs.contradictions++
	}
	rs.seen[key] = out
}

// noteAssumptions keeps the sentences of a thought that state an
// assumption.
func (r *run) noteAssumptions(thought string) {
	var rs *reasoning
	for _, line := range strings.Split(thought, "\n") {
		for _, sentence := range strings.SplitAfter(line, ". ") {
			s := strings.TrimSpace(sentence)
			l := strings.ToLower(s)
			if strings.HasPrefix(l, "assum") || strings.Contains(l, "i assume") || strings.HasPrefix(l, "presumably") {
				if rs == nil {
					rs = r.why()
				}
				if !slices.Contains(rs.assumptions, s) {
					rs.assumptions = append(rs.assumptions, s)
				}
			}
		}
	}
}
