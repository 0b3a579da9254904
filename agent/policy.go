package agent

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// policyTools is the tool middleware of the spec's policy: inside the
// user's middleware, outside the run log, so that a call the policy
// blocks reaches neither the log nor the tool.
func policyTools(p *policy.Policy) tool.Middleware {
	return func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, call *tool.Call) (tool.Output, error) {
			rule, reason := toolRule(p, call.Name)
			if rule == "" {
				return next(ctx, call)
			}
			if err := runOf(ctx).decided(ctx, call, rule, "block", reason); err != nil {
				return tool.Output{}, err
			}
			return tool.Output{}, &tool.ErrorDetails{Type: CodePolicyViolation, Message: reason, Recoverable: true,
				Details: map[string]any{"rule": rule}}
		}
	}
}

// toolRule returns the rule of p that blocks a call of the tool name,
// and why; "" when none does.
func toolRule(p *policy.Policy, name string) (rule, reason string) {
	switch {
	case policy.Matches(p.Tools.Deny, name):
		return "tools.deny", fmt.Sprintf("the policy denies the tool %s (policy.tools.deny)", name)
	case len(p.Tools.Allow) > 0 && !policy.Matches(p.Tools.Allow, name):
		return "tools.allow", fmt.Sprintf("the tool %s is not among those the policy allows (policy.tools.allow)", name)
	}
	return "", ""
}

// runOf returns the run whose context ctx is, or nil outside a run.
func runOf(ctx context.Context) *run {
	if l := linkFrom(ctx); l != nil {
		return l.run
	}
	return nil
}

// decided reports a policy decision other than a plain allow: a
// policy_decision event and, in a stored run, an audit record. A call a
// resumed run replays was reported when it ran.
func (r *run) decided(ctx context.Context, call *tool.Call, rule, decision, reason string) error {
	if r == nil || call.Turn < r.quiet {
		return nil
	}
	target := "tool:" + call.Name
	if r.s.bus.Active() {
		r.emit(event.Event{Type: event.PolicyDecision, Data: map[string]any{"rule": rule, "decision": decision,
			"target": target, "reason": reason, "call_id": call.ID}})
	}
	j := r.link.journal
	if j == nil || !j.write {
		return nil
	}
	_, err := j.st.AppendAudit(context.WithoutCancel(ctx), store.AuditRecord{RunID: r.st.RunID, Agent: r.a.spec.AgentName,
		UserID: r.info.UserID, Rule: rule, Decision: decision, Target: target, Reason: reason})
	if err != nil {
		return fmt.Errorf("%w: audit: %w", ErrStore, err)
	}
	return nil
}
