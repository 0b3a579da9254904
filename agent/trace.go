package agent

import (
	"encoding/json"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// trace is the run's reasoning trace as the run keeps it while it goes:
// a compact record a step and a model call, holding what the transcript
// and the agent do not already hold. A paused session keeps only these;
// the Result's Steps, ModelCalls, ToolsUsed and tool latencies are built
// from them once, when the run ends (build).
type trace struct {
	steps []stepRec
	calls []callRec
}

// stepRec is one Step: a tool call with its thought and observation, or a
// ReAct reply without one.
type stepRec struct {
	at       time.Duration // since the run's start
	dur      time.Duration // of the tool call
	thought  string
	obs      string
	call     *llm.ToolCall // as the model asked for it; nil for a step without a call
	more     *stepMore     // what few steps have
	turn     int32
	attempts int16
	known    bool // a tool of the agent's (not an unknown name): it counts in ToolsUsed
	// outIsObs says the call's output is its observation's bytes, as it
	// mostly is: the output is then made from the observation when the
	// run ends, all in one buffer, and not kept twice meanwhile.
	outIsObs bool
}

// stepMore is the rare part of a step.
type stepMore struct {
	err, parseError, finalAnswer string
	after                        string          // what the call waited for, and why
	out                          json.RawMessage // when it is not the observation
	hints                        *tool.Hints
	cached                       bool
}

// callRec is one ModelCall: the agent's own call to its own model in
// compact form, any other (a failed call, another model or provider, a
// handed-off agent's, a sub-agent's) whole.
type callRec struct {
	dur                time.Duration
	cost               float64
	prompt, completion int32
	turn, attempts     int32
	full               *ModelCall
	// priced: the reply named the model the agent is priced as (a
	// script's), not the id it calls.
	priced bool
}

// reserve makes room for a run as long as the agent's recent ones, so the
// trace does not grow turn by turn.
func (t *trace) reserve(s *sizes) {
	if n := hint(&s.calls); n > 0 && t.calls == nil {
		t.calls = make([]callRec, 0, n)
	}
	if n := hint(&s.steps); n > 0 && t.steps == nil {
		t.steps = make([]stepRec, 0, n)
	}
}

// step adds a step that began at (since the run's start); more may be nil.
func (t *trace) step(at time.Duration, turn int, thought string, call *llm.ToolCall, more *stepMore) *stepRec {
	t.steps = append(t.steps, stepRec{at: at, thought: thought, call: call, more: more, turn: int32(turn)})
	return &t.steps[len(t.steps)-1]
}

// call adds a model call, compact when it is the agent's own plain one.
func (t *trace) call(mc *ModelCall, d time.Duration, a *Agent) {
	priced := mc.Model != a.model && mc.Model == a.ownPrice.model
	if mc.Agent != "" || mc.Error != "" || mc.Partial != "" || mc.Provider != a.providerName || mc.Model != a.model && !priced ||
		mc.PromptTokens != int(int32(mc.PromptTokens)) || mc.CompletionTokens != int(int32(mc.CompletionTokens)) {
		c := *mc
		t.calls = append(t.calls, callRec{full: &c})
		return
	}
	t.calls = append(t.calls, callRec{dur: d, cost: mc.CostUSD, priced: priced,
		prompt: int32(mc.PromptTokens), completion: int32(mc.CompletionTokens), turn: int32(mc.Turn), attempts: int32(mc.Attempts)})
}

// outputs are the outputs of the steps whose output is their
// observation, one after another in one buffer.
func (t *trace) outputs() []byte {
	n := 0
	for i := range t.steps {
		if t.steps[i].outIsObs {
			n += len(t.steps[i].obs)
		}
	}
	if n == 0 {
		return nil
	}
	buf := make([]byte, 0, n)
	for i := range t.steps {
		if t.steps[i].outIsObs {
			buf = append(buf, t.steps[i].obs...)
		}
	}
	return buf
}

// build fills st's Steps, ModelCalls, ToolsUsed and ToolLatencyMS from
// the trace; a run calls it once, as it ends.
func (t *trace) build(st *State, a *Agent, start time.Time) {
	if len(t.steps) > 0 {
		steps := make([]Step, len(t.steps))
		n := 0
		for i := range t.steps {
			if t.steps[i].call != nil {
				n++
			}
		}
		actions := make([]Action, 0, n)
		outs := t.outputs()
		for i := range t.steps {
			rec := &t.steps[i]
			s := &steps[i]
			*s = Step{Step: i + 1, Turn: int(rec.turn), Thought: rec.thought, Observation: rec.obs, Timestamp: Timestamp{start.Add(rec.at)}}
			m := rec.more
			if m != nil {
				s.ParseError, s.FinalAnswer = m.parseError, m.finalAnswer
			}
			if rec.call == nil {
				continue
			}
			actions = append(actions, Action{Tool: rec.call.Name, CallID: rec.call.ID, Input: rec.call.Arguments,
				DurationMS: ms(rec.dur), Attempts: int(rec.attempts)})
			act := &actions[len(actions)-1]
			if rec.outIsObs {
				n := len(rec.obs)
				act.Output, outs = json.RawMessage(outs[:n:n]), outs[n:]
			}
			if m != nil {
				act.Error, act.Hints, act.Cached, act.After = m.err, m.hints, m.cached, m.after
				if m.out != nil {
					act.Output = m.out
				}
			}
			s.Action = act
		}
		st.Steps = steps
	}
	if len(t.calls) > 0 {
		calls := make([]ModelCall, len(t.calls))
		for i := range t.calls {
			c := &t.calls[i]
			if c.full != nil {
				calls[i] = *c.full
				continue
			}
			model := a.model
			if c.priced {
				model = a.ownPrice.model
			}
			calls[i] = ModelCall{Turn: int(c.turn), Provider: a.providerName, Model: model, PromptTokens: int(c.prompt),
				CompletionTokens: int(c.completion), CostUSD: c.cost, DurationMS: ms(c.dur), Attempts: int(c.attempts)}
		}
		st.ModelCalls = calls
	}
	st.ToolLatencyMS = map[string]float64{}
	for i := range t.steps {
		rec := &t.steps[i]
		if rec.call == nil || !rec.known {
			continue
		}
		name := rec.call.Name
		if _, seen := st.ToolLatencyMS[name]; !seen {
			st.ToolsUsed = append(st.ToolsUsed, name)
		}
		st.ToolLatencyMS[name] += ms(rec.dur)
	}
}
