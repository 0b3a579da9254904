package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// handoffPrefix starts the name of the tool that hands a conversation to
// another agent: transfer_to_NAME.
const handoffPrefix = "transfer_to_"

// handoff is an agent this one may pass the conversation and control to.
// The target is built on first use, so that agents may hand off to each
// other both ways.
type handoff struct {
	ref   string
	name  string
	desc  string
	once  sync.Once
	a     *Agent
	owned bool // built here (closed with the agent), not registered
	err   error
	opts  options
}

// errClosed is the error of a handoff whose agent was closed.
var errClosed = errors.New("the agent was closed")

// close returns the target to close, if it was built, and makes sure it
// is not built after.
func (h *handoff) close() *Agent {
	h.once.Do(func() { h.err = errClosed })
	if !h.owned {
		return nil
	}
	return h.a
}

func (h *handoff) agent() (*Agent, error) {
	h.once.Do(func() {
		if r := h.opts.lookup(h.ref); r != nil {
			h.a = r
			return
		}
		s, path, err := h.opts.agents.Load(h.ref)
		if err != nil {
			h.err = err
			return
		}
		o := h.opts
		o.baseDir = filepath.Dir(path)
		o.building = nil
		h.a, h.err = build(s, o)
		h.owned = h.err == nil
	})
	return h.a, h.err
}

// handoffTool is the tool the model calls to hand off; the loop intercepts
// it, so Call only runs if something invokes it directly.
type handoffTool struct{ h *handoff }

var handoffParams = json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string","description":"Why the other agent should take over."}},"additionalProperties":false}`)

func (t handoffTool) Info() tool.Info {
	desc := "Hand the conversation over to the " + t.h.name + " agent"
	if t.h.desc != "" {
		desc += ": " + t.h.desc
	}
	return tool.Info{Name: handoffPrefix + t.h.name, Description: desc + ". It continues from here.", Parameters: handoffParams,
		Idempotency: tool.Safe}
}

func (t handoffTool) Call(context.Context, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("a handoff is taken by the agent loop, not called")
}

// bindHandoffs checks the spec's handoffs and adds their transfer tools.
func (a *Agent) bindHandoffs(o options) []string {
	var problems []string
	for i, ref := range a.spec.Handoffs {
		var s *spec.Spec
		switch r := o.lookup(ref); {
		case r != nil:
			s = r.spec
		case o.agents == nil:
			problems = append(problems, fmt.Sprintf("handoffs[%d] %q: no registered agent and no agents directory to resolve it in", i, ref))
			continue
		default:
			var err error
			if s, _, err = o.agents.Load(ref); err != nil {
				problems = append(problems, fmt.Sprintf("handoffs[%d] %q: %v", i, ref, err))
				continue
			}
		}
		h := &handoff{ref: ref, name: s.AgentName, desc: s.Description, opts: o}
		a.handoffs = append(a.handoffs, h)
		if err := a.addBinding(&binding{tool: handoffTool{h}, handoff: h}); err != nil {
			problems = append(problems, fmt.Sprintf("handoffs[%d]: %v", i, err))
		}
	}
	return problems
}

// handoffReady builds the target of a handoff and checks that the caller
// may run it (policy.access.run: a transfer is no way around it) and that
// its prompts can be rendered from the run's input. A refusal is audited
// and given to the model as a policy_violation.
func (r *run) handoffReady(h *handoff, callID string) *tool.ErrorDetails {
	target, err := h.agent()
	if err != nil {
		return &tool.ErrorDetails{Type: "handoff_failed", Message: fmt.Sprintf("handoff to %s: %v", h.ref, err)}
	}
	if rule, reason := target.access().CheckRun(policy.PrincipalFrom(r.ctx), target.spec.AgentName); rule != "" {
		if err := r.report(r.ctx, "agent:"+target.spec.AgentName, callID, rule, "block", reason); err != nil {
			return &tool.ErrorDetails{Type: "handoff_failed", Message: err.Error()}
		}
		return &tool.ErrorDetails{Type: policy.CodeViolation, Message: reason, Recoverable: true, Details: map[string]any{"rule": rule}}
	}
	if _, probs := toolsMessages(target, r.st.Input); len(probs) > 0 {
		return &tool.ErrorDetails{Type: "handoff_failed", Message: fmt.Sprintf("handoff to %s: %s", h.ref, strings.Join(probs, "; "))}
	}
	return nil
}

// transfer answers a call of a transfer tool: the agent's policy decides
// on it as on any tool call (tools.deny, access.tools, approval, rate
// limits), then the target must be ready (handoffReady). The loop takes
// the handoff once the turn's calls are done.
func (r *run) transfer(b *binding, call *llm.ToolCall, index int, start time.Time) (json.RawMessage, error) {
	ready := func(context.Context, *tool.Call) (tool.Output, error) {
		if d := r.handoffReady(b.handoff, call.ID); d != nil {
			return tool.Output{}, d
		}
		return tool.Output{JSON: json.RawMessage(`{"transferred_to":"` + b.handoff.name + `"}`)}, nil
	}
	h := tool.Handler(ready)
	if r.a.policyMW != nil {
		h = r.a.policyMW(h)
	}
	c := &tool.Call{ID: call.ID, Name: call.Name, Arguments: call.Arguments, Tool: b.tool, Info: b.info,
		Turn: r.st.Turn, Index: index, Started: start, Time: r.at(start), Run: r.info}
	out, err := h(r.ctx, c)
	if err == nil {
		return out.JSON, nil
	}
	var d *tool.ErrorDetails
	if !errors.As(err, &d) {
		d = &tool.ErrorDetails{Type: "handoff_failed", Message: err.Error()}
	}
	return nil, d
}

// takeHandoff passes the run to the agent the transfer call names: the
// transcript stays; the system prompt, tools, model and limits become the
// target's.
func (r *run) takeHandoff(call *llm.ToolCall) {
	target, _ := r.a.table().byName[call.Name].handoff.agent() // built by exec
	msgs, _ := toolsMessages(target, r.st.Input)
	if len(msgs) > 1 && msgs[0].Role == llm.RoleSystem {
		if len(r.st.Messages) > 0 && r.st.Messages[0].Role == llm.RoleSystem {
			r.st.Messages[0] = msgs[0]
		} else {
			r.st.Messages = append([]llm.Message{msgs[0]}, r.st.Messages...)
		}
	}
	r.st.Handoffs = append(r.st.Handoffs, target.spec.AgentName+"@"+target.spec.Version)
	r.a = target
	r.s.provider = target.provider
	r.planner = target.planner
	r.setRequest(target)
}
