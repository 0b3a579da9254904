package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentry/agentry/tool"
)

// Codes of the errors a tool call the policy refuses gets.
const (
	CodeViolation   = "policy_violation"
	CodeRateLimited = "rate_limited"
)

// Host is the run a tool call belongs to, as the policy's middleware
// sees it: the agent puts it in each call's context (WithHost). Outside
// a run the middleware reports nothing, and holds every call that needs
// a person's approval (there is nobody to ask).
type Host interface {
	// Decided reports a decision other than a plain allow: an event and
	// an audit record.
	Decided(ctx context.Context, call *tool.Call, rule, decision, reason string) error
	// Hold decides a call that rule says needs a person's approval: it
	// may run (ok), or it is answered with out and err (a denial, or the
	// pause of the run until someone decides).
	Hold(ctx context.Context, call *tool.Call, rule, why string) (ok bool, out tool.Output, err error)
	// Replayed reports whether the call is one the run serves from its
	// log: it passed the rate limits when it ran.
	Replayed(call *tool.Call) bool
}

type hostKey struct{}

// WithHost returns ctx carrying h, for the policy's middleware of the
// calls made with it.
func WithHost(ctx context.Context, h Host) context.Context {
	return context.WithValue(ctx, hostKey{}, h)
}

// HostFrom returns the Host ctx carries, or nil.
func HostFrom(ctx context.Context) Host {
	h, _ := ctx.Value(hostKey{}).(Host)
	return h
}

// NamedRule is a host's rule with the name its decisions are audited
// under (rules.NAME).
type NamedRule struct {
	Name string
	Rule Rule
}

// Tools is the tool middleware of a policy and a host's rules. In order,
// for each call: tools.allow and tools.deny, the content filters on
// tool_input, the host's rules, approval.tools, rate_limits. A refused
// call is an error of type policy_violation (or rate_limited) for the
// model; every decision other than a plain allow is reported to the
// call's Host. The rate limiters are the middleware's: every call
// through it shares them. The network rules reach the HTTP tools through
// the call's context (NetworkFrom).
func Tools(p *Policy, rules ...NamedRule) tool.Middleware {
	if p == nil {
		p = &Policy{}
	}
	e := &enforcer{p: p, rules: rules, limits: newLimiters(p.RateLimits), filters: p.Filters(ToolInput),
		network: len(p.Network.AllowHosts) > 0 || p.Network.AllowPrivate || len(p.Network.IdempotencyKeyHosts) > 0}
	return func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, call *tool.Call) (tool.Output, error) {
			return e.call(ctx, call, next)
		}
	}
}

type enforcer struct {
	p       *Policy
	rules   []NamedRule
	limits  limiters
	filters *Filters
	network bool
}

func (e *enforcer) call(ctx context.Context, call *tool.Call, next tool.Handler) (tool.Output, error) {
	h := HostFrom(ctx)
	if e.network {
		ctx = WithNetwork(ctx, &e.p.Network)
	}
	if rule, reason := e.p.toolRule(call.Name); rule != "" {
		return block(ctx, h, call, rule, "block", CodeViolation, reason)
	}
	if rule, reason := e.p.Access.CheckTool(PrincipalFrom(ctx), call.Name); rule != "" {
		return block(ctx, h, call, rule, "block", CodeViolation, reason)
	}
	if out, err, done := e.filter(ctx, h, call); done {
		return out, err
	}
	approval, why := "", ""
	if Matches(e.p.Approval.Tools, call.Name) {
		approval = "approval.tools"
	}
	for _, r := range e.rules {
		v := check(ctx, r, call)
		rule := "rules." + r.Name
		switch {
		case v.Block:
			return block(ctx, h, call, rule, "block", CodeViolation, cmp.Or(v.Reason, "the rule "+r.Name+" blocks the call"))
		case v.Arguments != nil && !json.Valid(v.Arguments):
			return block(ctx, h, call, rule, "block", CodeViolation, "the rule "+r.Name+" gave arguments that are not JSON")
		case v.Arguments != nil:
			call.Arguments = v.Arguments
			if err := decided(ctx, h, call, rule, "modify", cmp.Or(v.Reason, "the rule "+r.Name+" changed the input")); err != nil {
				return tool.Output{}, err
			}
		}
		if v.Approval && approval == "" {
			approval, why = rule, v.Reason
		}
	}
	if approval != "" {
		if h == nil {
			return block(ctx, h, call, approval, "block", CodeViolation, "the call needs a person's approval, and this run cannot ask for it")
		}
		if ok, out, err := h.Hold(ctx, call, approval, why); !ok {
			return out, err
		}
	}
	if h == nil || !h.Replayed(call) {
		rule, blocked, err := e.limits.wait(ctx, call)
		switch {
		case err != nil:
			return tool.Output{}, err
		case blocked != "":
			return block(ctx, h, call, rule, "block", CodeRateLimited, blocked)
		case rule != "":
			if err := decided(ctx, h, call, rule, "wait", "waited for the rate limit"); err != nil {
				return tool.Output{}, err
			}
		}
	}
	return next(ctx, call)
}

// filter runs the content filters on the call's input: a block answers
// it (done), a redaction gives the tool the input redacted; the
// transcript and the trace keep what the model wrote.
func (e *enforcer) filter(ctx context.Context, h Host, call *tool.Call) (out tool.Output, err error, done bool) {
	if e.filters == nil {
		return tool.Output{}, nil, false
	}
	text, applied := e.filters.Apply(string(call.Arguments), true)
	for _, a := range applied {
		rule := "content_filters." + a.Filter
		if a.Action == Block {
			out, err := block(ctx, h, call, rule, "block", CodeViolation,
				fmt.Sprintf("the content filter %s found what it blocks in the input of %s", a.Filter, call.Name))
			return out, err, true
		}
		if err := decided(ctx, h, call, rule, "redact", "redacted in the tool's input"); err != nil {
			return tool.Output{}, err, true
		}
	}
	if len(applied) > 0 {
		call.Arguments = json.RawMessage(text)
	}
	return tool.Output{}, nil, false
}

// check asks a host's rule about call; a rule that panics blocks it.
func check(ctx context.Context, r NamedRule, call *tool.Call) (v Verdict) {
	defer func() {
		if p := recover(); p != nil {
			v = Verdict{Block: true, Reason: fmt.Sprintf("the rule %s failed: %v", r.Name, p)}
		}
	}()
	c := Call{Tool: call.Name, Arguments: call.Arguments}
	if run := call.Run; run != nil {
		c.RunID, c.Agent, c.UserID = run.RunID, run.AgentName, run.UserID
	}
	return r.Rule.Check(ctx, c)
}

func decided(ctx context.Context, h Host, call *tool.Call, rule, decision, reason string) error {
	if h == nil {
		return nil
	}
	return h.Decided(ctx, call, rule, decision, reason)
}

// block answers call with an error of type code, the decision reported.
func block(ctx context.Context, h Host, call *tool.Call, rule, decision, code, reason string) (tool.Output, error) {
	if err := decided(ctx, h, call, rule, decision, reason); err != nil {
		return tool.Output{}, err
	}
	return tool.Output{}, &tool.ErrorDetails{Type: code, Message: reason, Recoverable: true, Details: map[string]any{"rule": rule}}
}

// Denied is the error of a call a person denied, with why when they
// said, decided (and reported) as rule.
func Denied(ctx context.Context, h Host, call *tool.Call, rule, why string) (tool.Output, error) {
	reason := "a person denied the call"
	if why != "" {
		reason += ": " + why
	}
	return block(ctx, h, call, rule, "deny", CodeViolation, reason)
}

// toolRule returns the rule of p that blocks a call of the tool name,
// and why; "" when none does.
func (p *Policy) toolRule(name string) (rule, reason string) {
	switch {
	case Matches(p.Tools.Deny, name):
		return "tools.deny", fmt.Sprintf("the policy denies the tool %s (policy.tools.deny)", name)
	case len(p.Tools.Allow) > 0 && !Matches(p.Tools.Allow, name):
		return "tools.allow", fmt.Sprintf("the tool %s is not among those the policy allows (policy.tools.allow)", name)
	}
	return "", ""
}

// CheckRules refuses host rules without a usable name: a name is a word,
// as in rules.NAME, one per rule.
func CheckRules(rules []NamedRule) []string {
	var probs []string
	seen := map[string]bool{}
	for _, r := range rules {
		switch {
		case r.Name == "" || strings.ContainsAny(r.Name, " \t\n"):
			probs = append(probs, fmt.Sprintf("WithRule: the name %q is not a name (a word, as in rules.NAME)", r.Name))
		case r.Rule == nil:
			probs = append(probs, fmt.Sprintf("WithRule: the rule %s is nil", r.Name))
		case seen[r.Name]:
			probs = append(probs, fmt.Sprintf("WithRule: two rules are named %s", r.Name))
		}
		seen[r.Name] = true
	}
	return probs
}

// limiters are the rate limits of a policy: one per tool named, and "*"
// for the calls of every tool together.
type limiters map[string]*rate.Limiter

func newLimiters(rl map[string]RateLimit) limiters {
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
