package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// link ties a run to the sub-agent runs its tools start: their events go
// to its bus and their usage, cost and model calls roll up into it.
type link struct {
	runID    string
	bus      *event.Bus
	pending  atomic.Bool
	mu       sync.Mutex
	usage    llm.Usage
	cost     float64
	unpriced bool // a sub-run's model had no price
	calls    []ModelCall
	journal  *journal // set when the run is durable (or replayed)
	run      *run     // the run this is the link of
}

type linkKey struct{}

func withLink(ctx context.Context, l *link) context.Context {
	return context.WithValue(ctx, linkKey{}, l)
}

func linkFrom(ctx context.Context) *link {
	l, _ := ctx.Value(linkKey{}).(*link)
	return l
}

// add records a finished sub-run.
func (l *link) add(res *Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.usage.Add(res.TokenUsage)
	if res.EstimatedCost != nil {
		l.cost += *res.EstimatedCost
	} else {
		l.unpriced = true
	}
	for _, c := range res.ModelCalls {
		if c.Agent == "" {
			c.Agent = res.AgentName
		}
		l.calls = append(l.calls, c)
	}
	l.pending.Store(true)
}

// merge moves what sub-runs reported into r's state.
func (l *link) merge(r *run) {
	if !l.pending.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r.st.Usage.Add(l.usage)
	r.st.CostUSD += l.cost
	r.unpriced = r.unpriced || l.unpriced
	r.st.ModelCalls = append(r.st.ModelCalls, l.calls...)
	l.usage, l.cost, l.calls = llm.Usage{}, 0, nil
	l.pending.Store(false)
}

// subTool makes an agent callable as a tool of another.
type subTool struct{ a *Agent }

func (t subTool) Info() tool.Info {
	desc := t.a.spec.Description
	if desc == "" {
		desc = "Ask the " + t.a.spec.AgentName + " agent."
	}
	return tool.Info{Name: t.a.spec.AgentName, Description: desc, Parameters: subjectSchema(t.a.spec),
		Idempotency: tool.NonIdempotent, Timeout: time.Duration(t.a.limits.TimeoutMS) * time.Millisecond}
}

// Call runs the sub-agent in a session of its own, inside the caller's
// deadline, with its own limits, tightened to what remains of the
// parent's token, cost and tool-call budgets. It acts for the same user
// and correlation id. Its events carry its own agent name and the
// parent's run id; its usage and cost roll up into the parent's run.
func (t subTool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var input map[string]any
	if err := json.Unmarshal(args, &input); err != nil {
		return nil, &tool.ArgumentError{Tool: t.a.spec.AgentName, Problems: []string{"arguments are not a JSON object"}}
	}
	var opts []RunOption
	if l := linkFrom(ctx); l != nil {
		opts = append(opts, WithEventBus(l.bus), func(c *runConfig) { c.parent = l })
	}
	if c := tool.CallFrom(ctx); c != nil {
		b := c.Budget
		opts = append(opts, func(rc *runConfig) { rc.parentBudget = &b })
		if c.Run != nil {
			opts = append(opts, WithUser(c.Run.UserID), WithCorrelationID(c.Run.CorrelationID),
				WithTraceParent(c.Run.TraceParent), WithMetadata(c.Run.Metadata))
		}
	}
	s, err := t.a.NewSession(input, opts...)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return nil, &tool.ArgumentError{Tool: t.a.spec.AgentName, Problems: ie.Problems}
		}
		return nil, err
	}
	res, runErr := s.Run(ctx)
	if s.parent != nil {
		s.parent.add(res)
	}
	if runErr != nil {
		return nil, &tool.ErrorDetails{Type: "agent_error", Recoverable: true,
			Message: fmt.Sprintf("agent %s did not finish: %v", t.a.spec.AgentName, runErr),
			Details: map[string]any{"terminate_reason": string(res.TerminateReason), "partial_result": res.RawContent}}
	}
	return json.Marshal(res.Result)
}
