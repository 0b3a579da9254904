package agent

import (
	"encoding/json"
	"slices"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
)

// Secrets never leave a run in the clear (DESIGN.md 3.9): its events,
// logs, Result and log in the store go through the agent's redactor
// (policy.Secrets). Tools get the real values.

// redactEvent redacts the text an event carries. Its records are the
// event's own: the transcript is not touched.
func redactEvent(e *event.Event, red *policy.Redactor) {
	e.Content = red.String(e.Content)
	if tc := e.Tool; tc != nil {
		tc.Arguments = raw(red, tc.Arguments)
		tc.Output = raw(red, tc.Output)
		tc.Error = red.String(tc.Error)
	}
	if e.Error != nil {
		e.Error.Message = red.String(e.Error.Message)
	}
	for k, v := range e.Data {
		if s, ok := v.(string); ok {
			if clean := red.String(s); clean != s { // a string put in an any is an allocation
				e.Data[k] = clean
			}
		}
	}
}

func raw(red *policy.Redactor, b json.RawMessage) json.RawMessage {
	return json.RawMessage(red.Bytes(b))
}

// redactResult redacts the text of a finished run's Result: the answer,
// the transcript, the trace and the error. The run is over: its state
// may be changed.
func redactResult(res *Result, red *policy.Redactor) {
	res.RawContent = red.String(res.RawContent)
	res.Decision = red.String(res.Decision)
	switch v := res.Result.(type) {
	case string:
		if clean := red.String(v); clean != v { // a string put in an any is an allocation
			res.Result = clean
		}
	case map[string]any:
		if b, err := json.Marshal(v); err == nil {
			if out := red.Bytes(b); string(out) != string(b) {
				var m map[string]any
				if json.Unmarshal(out, &m) == nil {
					res.Result = m
				}
			}
		}
	}
	if res.Error != nil {
		res.Error.Message = red.String(res.Error.Message)
	}
	for i := range res.Messages {
		redactMessage(&res.Messages[i], red)
	}
	for i := range res.Steps {
		s := &res.Steps[i]
		s.Thought, s.Observation, s.FinalAnswer, s.ParseError = red.String(s.Thought), red.String(s.Observation),
			red.String(s.FinalAnswer), red.String(s.ParseError)
		if a := s.Action; a != nil {
			a.Input, a.Output, a.Error = raw(red, a.Input), raw(red, a.Output), red.String(a.Error)
		}
	}
	for i := range res.ModelCalls {
		c := &res.ModelCalls[i]
		c.Error, c.Partial = red.String(c.Error), red.String(c.Partial)
	}
	res.AssumptionsMade = redactAll(red, res.AssumptionsMade)
}

func redactMessage(m *llm.Message, red *policy.Redactor) {
	m.Content = red.String(m.Content)
	if len(m.ToolCalls) == 0 {
		return
	}
	var calls []llm.ToolCall // a copy, made when needed: the reply may be shared with its provider
	for i, c := range m.ToolCalls {
		args := raw(red, c.Arguments)
		if len(args) == len(c.Arguments) && (len(args) == 0 || &args[0] == &c.Arguments[0]) {
			continue // unchanged
		}
		if calls == nil {
			calls = slices.Clone(m.ToolCalls)
		}
		calls[i].Arguments = args
	}
	if calls != nil {
		m.ToolCalls = calls
	}
}

func redactAll(red *policy.Redactor, ss []string) []string {
	for i, s := range ss {
		ss[i] = red.String(s)
	}
	return ss
}
