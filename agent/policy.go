package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// policyTools is the tool middleware of the spec's policy and the host's
// rules: inside the user's middleware, outside the run log, so that a
// call the policy blocks reaches neither the log nor the tool. Its rate
// limiters are the agent's: every run of the agent in the process shares
// them.
func policyTools(p *policy.Policy, rules []hostRule) tool.Middleware {
	if p == nil {
		p = &policy.Policy{}
	}
	limits := newLimiters(p.RateLimits)
	filters := filtersOn(p, policy.ToolInput)
	network := len(p.Network.AllowHosts) > 0 || p.Network.AllowPrivate || len(p.Network.IdempotencyKeyHosts) > 0
	return func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, call *tool.Call) (tool.Output, error) {
			r := runOf(ctx)
			if network {
				ctx = policy.WithNetwork(ctx, &p.Network) // the HTTP tools read it
			}
			if rule, reason := toolRule(p, call.Name); rule != "" {
				return r.block(ctx, call, rule, CodePolicyViolation, reason)
			}
			for _, f := range filters {
				redacted := f.r.Bytes(call.Arguments) // the same slice when the filter finds nothing
				if len(redacted) == len(call.Arguments) && (len(redacted) == 0 || &redacted[0] == &call.Arguments[0]) {
					continue
				}
				rule := "content_filters." + f.name
				if f.action == policy.Block {
					return r.block(ctx, call, rule, CodePolicyViolation,
						fmt.Sprintf("the content filter %s found what it blocks in the input of %s", f.name, call.Name))
				}
				// The tool gets the input redacted; the transcript and the
				// trace keep what the model wrote.
				call.Arguments = redacted
				if err := r.decided(ctx, call, rule, "redact", "redacted in the tool's input"); err != nil {
					return tool.Output{}, err
				}
			}
			approval, why := "", ""
			if policy.Matches(p.Approval.Tools, call.Name) {
				approval = "approval.tools"
			}
			for _, h := range rules {
				v := h.check(ctx, r, call)
				rule := "rules." + h.name
				switch {
				case v.Block:
					return r.block(ctx, call, rule, CodePolicyViolation, cmp.Or(v.Reason, "the rule "+h.name+" blocks the call"))
				case v.Arguments != nil && !json.Valid(v.Arguments):
					return r.block(ctx, call, rule, CodePolicyViolation, "the rule "+h.name+" gave arguments that are not JSON")
				case v.Arguments != nil:
					call.Arguments = v.Arguments
					if err := r.decided(ctx, call, rule, "modify", cmp.Or(v.Reason, "the rule "+h.name+" changed the input")); err != nil {
						return tool.Output{}, err
					}
				}
				if v.Approval && approval == "" {
					approval, why = rule, v.Reason
				}
			}
			if approval != "" {
				if out, err, held := r.approval(ctx, call, approval, why); held {
					return out, err
				}
			}
			if !r.replaying(call) {
				rule, blocked, err := limits.wait(ctx, call)
				switch {
				case err != nil:
					return tool.Output{}, err
				case blocked != "":
					return r.block(ctx, call, rule, "rate_limited", blocked)
				case rule != "":
					if err := r.decided(ctx, call, rule, "wait", "waited for the rate limit"); err != nil {
						return tool.Output{}, err
					}
				}
			}
			return next(ctx, call)
		}
	}
}

// approval holds back a call that needs a person's approval: it goes on
// (held false) once approved, is denied with a policy_violation, or
// pauses the run (an ApprovalError) until a resume decides it. Outside a
// run there is nobody to ask: the call is held.
func (r *run) approval(ctx context.Context, call *tool.Call, rule, why string) (out tool.Output, err error, held bool) {
	key := call.Key()
	if r != nil {
		ok, decided := r.s.cfg.decisions[key] // bound to keys by Resume: call ids repeat

		switch {
		case decided && ok:
			if err := r.decided(ctx, call, rule, "approve", "approved by a person"); err != nil {
				return tool.Output{}, err, true
			}
			return tool.Output{}, nil, false
		case decided:
			reason := "a person denied the call"
			if why := r.s.cfg.denyReason; why != "" {
				reason += ": " + why
			}
			out, err := r.blockAs(ctx, call, rule, "deny", CodePolicyViolation, reason)
			return out, err, true
		}
		reason := "the call waits for a person's approval"
		if why != "" {
			reason += ": " + why
		}
		if err := r.decided(ctx, call, rule, "pause", reason); err != nil {
			return tool.Output{}, err, true
		}
		if j := r.link.journal; j != nil {
			j.add(store.KindApproval, call.Turn, key, runlog.Approval{CallID: call.ID, Tool: call.Name, Arguments: string(call.Arguments), Rule: rule})
		}
	}
	return tool.Output{}, &ApprovalError{CallID: call.ID, Tool: call.Name, Key: key, Arguments: call.Arguments, Rule: rule}, true
}

// hostRule is a rule the host added with WithRule.
type hostRule struct {
	name string
	r    policy.Rule
}

// check asks the rule about call; a rule that panics blocks the call.
func (h hostRule) check(ctx context.Context, r *run, call *tool.Call) (v policy.Verdict) {
	defer func() {
		if p := recover(); p != nil {
			v = policy.Verdict{Block: true, Reason: fmt.Sprintf("the rule %s failed: %v", h.name, p)}
		}
	}()
	c := policy.Call{Tool: call.Name, Arguments: call.Arguments}
	if r != nil {
		c.RunID, c.Agent, c.UserID = r.st.RunID, r.a.spec.AgentName, r.info.UserID
	}
	return h.r.Check(ctx, c)
}

// filter is a content filter of the policy, compiled.
type filter struct {
	name   string
	action policy.Action
	r      *policy.Redactor
}

// filtersOn compiles the policy's content filters on target.
func filtersOn(p *policy.Policy, target policy.Target) []filter {
	if p == nil {
		return nil
	}
	var out []filter
	for i := range p.ContentFilters {
		f := &p.ContentFilters[i]
		if !slices.Contains(f.On, target) {
			continue
		}
		if r, err := f.Redactor(); err == nil {
			out = append(out, filter{name: f.Name, action: f.Action, r: r})
		}
	}
	return out
}

// block answers a call the policy blocks with an error of type code.
func (r *run) block(ctx context.Context, call *tool.Call, rule, code, reason string) (tool.Output, error) {
	return r.blockAs(ctx, call, rule, "block", code, reason)
}

// blockAs is block with the decision named.
func (r *run) blockAs(ctx context.Context, call *tool.Call, rule, decision, code, reason string) (tool.Output, error) {
	if err := r.decided(ctx, call, rule, decision, reason); err != nil {
		return tool.Output{}, err
	}
	return tool.Output{}, &tool.ErrorDetails{Type: code, Message: reason, Recoverable: true, Details: map[string]any{"rule": rule}}
}

// replaying reports whether call is one a resumed run or a replay serves
// from its log: the policy let it through when it ran.
func (r *run) replaying(call *tool.Call) bool {
	if r == nil {
		return false
	}
	j := r.link.journal
	return call.Turn < r.quiet || j != nil && j.w == nil
}

// limiters are the rate limits of a policy: one per tool named, and "*"
// for the calls of every tool together.
type limiters map[string]*rate.Limiter

func newLimiters(rl map[string]policy.RateLimit) limiters {
	if len(rl) == 0 {
		return nil
	}
	out := limiters{}
	for name, l := range rl {
		per := rate.Limit(l.PerSecond)
		if l.PerMinute > 0 {
			per = rate.Limit(l.PerMinute / 60)
		}
		out[name] = rate.NewLimiter(per, max(l.Burst, 1))
	}
	return out
}

// wait takes a token for call from each limiter that applies, waiting
// when the wait ends before the run's deadline. It returns the rule that
// made it wait, or that blocks it with why (blocked), or an error when
// the run ended while it waited.
func (ls limiters) wait(ctx context.Context, call *tool.Call) (rule, blocked string, err error) {
	deadline := call.Budget.Deadline
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	for _, name := range []string{call.Name, "*"} {
		l := ls[name]
		if l == nil {
			continue
		}
		now := time.Now()
		res := l.ReserveN(now, 1)
		delay := res.DelayFrom(now)
		if !res.OK() || !deadline.IsZero() && now.Add(delay).After(deadline) {
			res.CancelAt(now)
			return "rate_limits." + name, fmt.Sprintf("the rate limit of %s (policy.rate_limits.%s) allows the call only in %s, after the run's deadline",
				call.Name, name, delay.Round(time.Millisecond)), nil
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				res.Cancel()
				return "", "", ctx.Err()
			}
			rule = "rate_limits." + name
		}
	}
	return rule, "", nil
}

// checkPolicy refuses a rate limit of a tool the agent does not have (a
// misspelt name would limit nothing), and host rules without a usable
// name.
func (a *Agent) checkPolicy() []string {
	var probs []string
	seen := map[string]bool{}
	for _, h := range a.o.rules {
		switch {
		case h.name == "" || strings.ContainsAny(h.name, " \t\n"):
			probs = append(probs, fmt.Sprintf("WithRule: the name %q is not a name (a word, as in rules.NAME)", h.name))
		case h.r == nil:
			probs = append(probs, fmt.Sprintf("WithRule: the rule %s is nil", h.name))
		case seen[h.name]:
			probs = append(probs, fmt.Sprintf("WithRule: two rules are named %s", h.name))
		}
		seen[h.name] = true
	}
	p := a.spec.Policy
	if p == nil {
		return probs
	}
	for name := range p.RateLimits {
		if _, ok := a.tools[name]; !ok && name != "*" {
			probs = append(probs, fmt.Sprintf("policy.rate_limits.%s: the agent has no tool %q (name one of its tools, or *)", name, name))
		}
	}
	slices.Sort(probs)
	return probs
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
	return r.report(ctx, "tool:"+call.Name, call.ID, rule, decision, reason)
}

// report emits a policy decision on target and audits it.
func (r *run) report(ctx context.Context, target, callID, rule, decision, reason string) error {
	if r.s.bus.Active() {
		data := map[string]any{"rule": rule, "decision": decision, "target": target, "reason": reason}
		if callID != "" {
			data["call_id"] = callID
		}
		r.emit(event.Event{Type: event.PolicyDecision, Data: data})
	}
	j := r.link.journal
	if j == nil || j.w == nil {
		return nil
	}
	return j.w.Audit(ctx, store.AuditRecord{Agent: r.a.spec.AgentName, UserID: r.info.UserID, Rule: rule,
		Decision: decision, Target: target, Reason: reason})
}

// ErrPolicyViolation is matched by the error of a run whose answer a
// content filter on the output blocked.
var ErrPolicyViolation = errors.New("policy violation")

// filterOutput applies the policy's filters on the output to a final
// answer: a block fails the run (its answer is not returned), a redact
// replaces what the filter finds.
func (r *run) filterOutput(final *Final) (*Final, error) {
	var obj []byte // the output object as JSON, kept redacted as the filters go
	if final.Output != nil {
		obj, _ = json.Marshal(final.Output)
	}
	for _, f := range r.a.outFilters {
		text, redObj := f.r.String(final.Text), f.r.Bytes(obj) // as they were when the filter finds nothing
		if text == final.Text && string(redObj) == string(obj) {
			continue
		}
		rule := "content_filters." + f.name
		if f.action == policy.Block {
			// The answer is withheld from the Result: its text, and the
			// reply that carried it in the transcript.
			r.rewriteAnswer(func(string) string { return "[BLOCKED:" + rule + "]" })
			r.st.LastContent = ""
			reason := fmt.Sprintf("the content filter %s found what it blocks in the answer", f.name)
			if err := r.report(r.ctx, "output", "", rule, "block", reason); err != nil {
				return nil, err
			}
			return nil, withDetails(fmt.Errorf("%w: %s", ErrPolicyViolation, reason), map[string]any{"rule": rule})
		}
		cp := *final
		cp.Text = text
		if obj != nil {
			var m map[string]any
			if json.Unmarshal(redObj, &m) == nil {
				cp.Output, obj = m, redObj
			}
		}
		r.st.LastContent = f.r.String(r.st.LastContent)
		r.rewriteAnswer(f.r.String)
		final = &cp
		if err := r.report(r.ctx, "output", "", rule, "redact", "redacted in the answer"); err != nil {
			return nil, err
		}
	}
	return final, nil
}

// rewriteAnswer rewrites the text of the model's last reply in the
// transcript, the one that carried the answer.
func (r *run) rewriteAnswer(fn func(string) string) {
	msgs := r.st.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleAssistant {
			msgs[i].Content = fn(msgs[i].Content)
			return
		}
	}
}
