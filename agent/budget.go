package agent

import (
	"math"
	"time"

	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// budget is a run's effective limits; -1 means none.
type budget struct {
	maxTurns int32
	// window is the context window the transcript must fit, in tokens:
	// the agent's, or learned from a provider's context-length error; 0
	// is unknown.
	window       int32
	timeout      time.Duration
	maxTokens    int
	maxCost      float64
	maxToolCalls int
}

// limitsOf turns a spec's limits (0 = none for budgets) into a budget.
func limitsOf(l spec.Limits) budget {
	b := budget{maxTurns: int32(min(l.MaxTurns, math.MaxInt32)), timeout: time.Duration(l.TimeoutMS) * time.Millisecond,
		maxTokens: l.MaxTotalTokens, maxCost: l.MaxCostUSD, maxToolCalls: l.MaxToolCalls}
	if b.maxTokens == 0 {
		b.maxTokens = tool.Unlimited
	}
	if b.maxCost == 0 {
		b.maxCost = tool.Unlimited
	}
	if b.maxToolCalls == 0 {
		b.maxToolCalls = tool.Unlimited
	}
	return b
}

// tighten applies the caller's budget and, for a sub-agent, what remained
// of its parent's.
func (c *runConfig) tighten(l spec.Limits) budget {
	b := limitsOf(l)
	// The caller's limits: zero fields add nothing.
	var u spec.Limits
	if e := c.extra; e != nil && e.limits != nil {
		u = *e.limits
	}
	capPositive(&b.maxTurns, int32(min(u.MaxTurns, math.MaxInt32)))
	capPositive(&b.maxTokens, u.MaxTotalTokens)
	capPositive(&b.maxToolCalls, u.MaxToolCalls)
	capPositive(&b.maxCost, u.MaxCostUSD)
	if t := time.Duration(u.TimeoutMS) * time.Millisecond; t > 0 && (b.timeout <= 0 || t < b.timeout) {
		b.timeout = t
	}
	// A sub-agent may spend at most what its parent has left: here a
	// remaining 0 is a limit of 0, not "none".
	if e := c.extra; e != nil && e.parentBudget != nil {
		p := e.parentBudget
		capAt(&b.maxTokens, p.Tokens)
		capAt(&b.maxToolCalls, p.ToolCalls)
		capAt(&b.maxCost, p.CostUSD)
	}
	return b
}

// capAt lowers the limit *cur (negative: none) to v, unless v is
// negative (none).
func capAt[T int | int32 | float64](cur *T, v T) {
	if v >= 0 && (*cur < 0 || v < *cur) {
		*cur = v
	}
}

// capPositive is capAt for limits where zero means none.
func capPositive[T int | int32 | float64](cur *T, v T) {
	if v > 0 {
		capAt(cur, v)
	}
}

// remaining is what is left of the run's budgets once calls more tool
// calls have been made.
func (r *run) remaining(calls int) tool.Budget {
	b := tool.Budget{Tokens: tool.Unlimited, CostUSD: tool.Unlimited, ToolCalls: tool.Unlimited}
	l, st := r.limits, r.st
	if l.maxTokens >= 0 {
		b.Tokens = max(l.maxTokens-st.Usage.TotalTokens, 0)
	}
	if l.maxCost >= 0 {
		b.CostUSD = max(l.maxCost-st.CostUSD, 0)
	}
	if l.maxToolCalls >= 0 {
		b.ToolCalls = max(l.maxToolCalls-st.ToolCalls-calls, 0)
	}
	if dl, ok := r.ctx.Deadline(); ok {
		b.Deadline = dl
	}
	return b
}
