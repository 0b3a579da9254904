package agent

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/spec"
)

// What a planner (and a reflector) holds of the run beyond its
// transcript, the AI Agent Proposal's PlannerState: the budget left, a
// scratchpad, and the run's memory.

// Remaining is the budget the run has left, as limits: each limit of
// the run less what it has used so far (turns, this one included;
// tokens; cost; tool calls; time, from its deadline). A limit the run
// does not have is 0, as in Limits; the loop ends a run before a
// planner could see one used up.
func (t *Turn) Remaining() spec.Limits {
	r := t.r
	b, st := r.limits, r.st
	var left spec.Limits
	if b.maxTurns > 0 {
		left.MaxTurns = max(int(b.maxTurns)-st.Turn+1, 1)
	}
	if b.maxTokens > 0 {
		left.MaxTotalTokens = max(b.maxTokens-st.Usage.TotalTokens, 1)
	}
	if b.maxCost > 0 {
		left.MaxCostUSD = max(b.maxCost-st.CostUSD, 1e-9)
	}
	if b.maxToolCalls > 0 {
		left.MaxToolCalls = max(b.maxToolCalls-st.ToolCalls, 1)
	}
	if d, ok := r.ctx.Deadline(); ok {
		left.TimeoutMS = max(time.Until(d).Milliseconds(), 1)
	}
	return left
}

// Scratch is the run's scratchpad: anything a planner or a reflector
// keeps from one turn to the next. It lives as long as the run's
// process: a resumed run starts it empty.
func (t *Turn) Scratch() map[string]any {
	n := t.r.note()
	if n.scratch == nil {
		n.scratch = map[string]any{}
	}
	return n.scratch
}

// Memory is the run's memory stream, the spec's memory (nil and "" for
// an agent without one), to read: m.Read(ctx, stream, ...) and
// m.Search. Writes go through Remember.
func (t *Turn) Memory() (m memory.Memory, stream string) {
	rm := t.r.mem
	if rm == nil {
		return nil, ""
	}
	return rm.am.b.Memory(), rm.stream
}

// Remember appends text to the run's memory stream, as its spec's
// memory.write does at the end of the run, at any turn: through the
// policy's memory_write filters, sealed when the memory is, written once
// whatever crashes and resumes (a durable run keys it by turn and
// order), and listed in the Result's memory_deltas. kind labels the
// entry ("note", "fact"). An agent without memory gets ErrMemory.
func (t *Turn) Remember(ctx context.Context, kind, text string) error {
	r := t.r
	if r.mem == nil {
		return fmt.Errorf("%w: agent %s has no memory to write to (its spec's memory)", ErrMemory, r.a.Name())
	}
	n := r.note()
	if n.rememberedAt != r.st.Turn {
		n.rememberedAt, n.remembered = r.st.Turn, 0
	}
	n.remembered++
	key := r.st.RunID + ":memory:turn" + strconv.Itoa(r.st.Turn) + ":" + strconv.Itoa(n.remembered)
	if err := r.rememberOnce(ctx, key, kind, text); err != nil {
		return fmt.Errorf("%w: writing to %s: %w", ErrMemory, r.mem.stream, err)
	}
	return nil
}

// WithReflector gives the agent a reflector: the step after a turn's
// tools ran and before the next plan (plan, act, reflect). It sees the
// turn's results (t.Results), may merge them into the run's state
// (t.Scratch), write memory (t.Remember) and end the run: a non-nil
// Final is the run's answer (its Err fails it). A nil Final lets the
// planner plan the next turn; an error fails the run. Without one, the
// results go to the planner as they are. It runs once for each turn
// whose tools ran, as the next turn begins (a run it ends counts that
// turn), so a run that reached its last turn ends without reflecting.
func WithReflector(fn func(ctx context.Context, t *Turn) (*Final, error)) Option {
	return func(o *options) { o.reflector = fn }
}

// reflecting is a planner that reflects on the last turn's results
// before its planner plans the next: the reflector is a step of the
// plan, not a branch of the loop.
type reflecting struct {
	Planner
	reflect func(ctx context.Context, t *Turn) (*Final, error)
}

func (p reflecting) Next(ctx context.Context, t *Turn) (Decision, error) {
	if t.ranTools() {
		final, err := p.reflect(ctx, t)
		if err != nil {
			return Decision{}, err
		}
		if final != nil {
			return Decision{Final: final}, nil
		}
	}
	return p.Planner.Next(ctx, t)
}

// ranTools says whether the turn before this one ran tools: the results
// a reflector reflects on are new (a turn without tools, a correction or
// a reply that did not parse, leaves the earlier ones in place).
func (t *Turn) ranTools() bool {
	steps := t.r.trace.steps
	for i := len(steps) - 1; i >= 0; i-- {
		if s := &steps[i]; s.call != nil {
			return int(s.turn) == t.r.st.Turn-1
		}
	}
	return false
}

// observingReflecting keeps its planner's own way of showing results.
type observingReflecting struct {
	reflecting
	Observer
}

// withReflector wraps p with the reflector, keeping it an Observer when
// it is one.
func withReflector(p Planner, fn func(ctx context.Context, t *Turn) (*Final, error)) Planner {
	r := reflecting{Planner: p, reflect: fn}
	if o, ok := p.(Observer); ok {
		return observingReflecting{r, o}
	}
	return r
}
