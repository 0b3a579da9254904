package agent

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/tool"
)

// Secrets never leave a run in the clear: its events,
// logs, Result and log in the store go through the agent's redactor
// (policy.Secrets). Tools get the real values.

func raw(red *policy.Redactor, b json.RawMessage) json.RawMessage {
	return json.RawMessage(red.Bytes(b))
}

// redactResult redacts the text of a finished run's Result: the answer,
// the transcript, the trace and the error. The run is over: its state
// may be changed.
func redactResult(res *Result, red *policy.Redactor, clean [2]int) {
	// The answer is in the Result three times over (raw_content, result,
	// the last reply): it is looked at once.
	answer := res.RawContent
	res.RawContent = red.String(answer)
	switch v := res.Result.(type) {
	case string:
		if v == answer {
			if res.RawContent != answer {
				res.Result = res.RawContent
			}
		} else if clean := red.String(v); clean != v { // a string put in an any is an allocation
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
		res.Error.Details = redactDetails(res.Error.Details, red)
	}
	for i := range res.Waiting {
		w := &res.Waiting[i]
		w.Arguments, w.Reason = red.Bytes(w.Arguments), red.String(w.Reason)
	}
	if d := res.Diagnostics; d != nil {
		d.Warnings = redactAll(red, d.Warnings)
	}
	if ri := res.RetryInfo; ri != nil {
		ri.LastError = red.String(ri.LastError)
	}
	for k, v := range res.Attachments {
		res.Attachments[k] = red.String(v)
	}
	for i := range res.Messages {
		if i >= clean[0] && i < clean[1] {
			continue // a conversation's history as the store gave it: redacted when it was written
		}
		m := &res.Messages[i]
		if m.Content == answer && len(m.ToolCalls) == 0 {
			m.Content = res.RawContent
			continue
		}
		redactMessage(m, red)
	}
	for i := range res.Steps {
		s := &res.Steps[i]
		s.Thought, s.Observation, s.FinalAnswer, s.ParseError = red.String(s.Thought), red.String(s.Observation),
			red.String(s.FinalAnswer), red.String(s.ParseError)
		if a := s.Action; a != nil {
			a.Input, a.Output, a.Error = raw(red, a.Input), raw(red, a.Output), red.String(a.Error)
			a.Hints = redactHints(a.Hints, red)
		}
	}
	for i := range res.ModelCalls {
		c := &res.ModelCalls[i]
		c.Error, c.Partial = red.String(c.Error), red.String(c.Partial)
	}
	res.AssumptionsMade = redactAll(red, res.AssumptionsMade)
	res.ContextUsed = redactAll(red, res.ContextUsed)
	res.Alternatives = redactAlternatives(res.Alternatives, red)
	for i := range res.MemoryDeltas {
		res.MemoryDeltas[i].Text = red.String(res.MemoryDeltas[i].Text)
	}
}

// redactHints returns a tool's hints with their text redacted: a copy,
// since the run's cache may still serve the same hints to a later call.
func redactHints(h *tool.Hints, red *policy.Redactor) *tool.Hints {
	if h == nil {
		return nil
	}
	cp := *h
	cp.RiskFactors = redactAll(red, slices.Clone(h.RiskFactors))
	cp.Dependencies = redactAll(red, slices.Clone(h.Dependencies))
	cp.SuggestedNextActions = redactAll(red, slices.Clone(h.SuggestedNextActions))
	cp.Alternatives = redactAlternatives(slices.Clone(h.Alternatives), red)
	return &cp
}

// redactAlternatives redacts the text of alternatives in place.
func redactAlternatives(alts []tool.Alternative, red *policy.Redactor) []tool.Alternative {
	for i := range alts {
		a := &alts[i]
		a.Approach, a.Reasoning = red.String(a.Approach), red.String(a.Reasoning)
		a.Pros = redactAll(red, slices.Clone(a.Pros))
		a.Cons = redactAll(red, slices.Clone(a.Cons))
	}
	return alts
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

// redactDetails returns an error's details redacted: a copy when anything
// was found (a stack or a value may quote a secret).
func redactDetails(d map[string]any, red *policy.Redactor) map[string]any {
	if len(d) == 0 {
		return d
	}
	b, err := json.Marshal(d)
	if err != nil {
		return d
	}
	out := red.Bytes(b)
	if string(out) == string(b) {
		return d
	}
	var m map[string]any
	if json.Unmarshal(out, &m) != nil {
		return d
	}
	return m
}

// redactErr is the error a run returns, with its secrets redacted as its
// Result's message is: a Go program that logs it logs no key. errors.Is
// reaches what it wraps; errors.As for an *llm.APIError finds a copy
// whose message and cause are redacted too (the provider's own value is
// left as it is: others may hold it).
func redactErr(err error, red *policy.Redactor) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var api *llm.APIError
	if clean := red.String(msg); clean != msg || errors.As(err, &api) && apiLeaks(api, red) {
		return &redactedError{msg: clean, err: err, red: red}
	}
	return err
}

// apiLeaks says whether an APIError's message or cause holds a secret.
func apiLeaks(api *llm.APIError, red *policy.Redactor) bool {
	return red.Found(api.Message) || api.Err != nil && red.Found(api.Err.Error())
}

// redactedError is an error whose text is redacted.
type redactedError struct {
	msg string
	err error
	red *policy.Redactor
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// As gives an *llm.APIError target a redacted copy of the one wrapped.
func (e *redactedError) As(target any) bool {
	t, ok := target.(**llm.APIError)
	if !ok {
		return false
	}
	var api *llm.APIError
	if !errors.As(e.err, &api) {
		return false
	}
	c := *api
	c.Message = e.red.String(api.Message)
	if api.Err != nil && e.red.Found(api.Err.Error()) {
		c.Err = errors.New(e.red.String(api.Err.Error()))
	}
	*t = &c
	return true
}
