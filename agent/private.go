package agent

import (
	"encoding/json"
	"strings"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
)

// private says the tool's inputs and outputs are kept out of what the
// run emits and stores (policy.private_tools): digests stand in.
func (a *Agent) private(tool string) bool {
	return a.spec.Policy != nil && len(a.spec.Policy.PrivateTools) > 0 && policy.Matches(a.spec.Policy.PrivateTools, tool)
}

// hidePrivate puts digests in place of the private tools' inputs and
// outputs in a finished run's Result: the steps, and wherever the
// transcript holds them (the calls' arguments, the observations).
func (r *run) hidePrivate(res *Result) {
	a := r.s.agent
	if a.spec.Policy == nil || len(a.spec.Policy.PrivateTools) == 0 {
		return
	}
	var texts []string // what to hide wherever it is quoted
	for i := range res.Steps {
		s := &res.Steps[i]
		if s.Action == nil || !a.private(s.Action.Tool) {
			continue
		}
		act := *s.Action // the trace's own copy: outputs share one buffer
		texts = append(texts, string(act.Input), string(act.Output), s.Observation)
		act.Input, act.Output = policy.PrivateJSON(act.Input), policy.PrivateJSON(act.Output)
		s.Observation = policy.Private(s.Observation)
		s.Action = &act
	}
	msgs := make([]llm.Message, len(res.Messages))
	copy(msgs, res.Messages)
	for i := range msgs {
		m := &msgs[i]
		if m.Role == llm.RoleTool && a.private(m.Name) {
			m.Content = policy.Private(m.Content)
			continue
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				if a.private(c.Name) {
					c.Arguments = json.RawMessage(policy.PrivateJSON(c.Arguments))
				}
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		for _, t := range texts {
			if len(t) > 2 && strings.Contains(m.Content, t) {
				m.Content = strings.ReplaceAll(m.Content, t, policy.Private(t))
			}
		}
	}
	res.Messages = msgs
	for i := range res.Waiting {
		if w := &res.Waiting[i]; a.private(w.Tool) {
			w.Arguments = policy.PrivateJSON(w.Arguments)
		}
	}
}

// hideCall is a call as events and logs show it: its arguments a digest
// when the tool is private.
func (r *run) hideArgs(tool string, args json.RawMessage) json.RawMessage {
	if r.s.agent.private(tool) {
		return policy.PrivateJSON(args)
	}
	return args
}
