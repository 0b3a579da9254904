package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// link ties a run to the sub-agent runs its tools start: their events go
// to its bus and their usage, cost and model calls roll up into it.
type link struct {
	pending atomic.Bool
	mu      sync.Mutex
	sub     *rollup     // what sub-runs reported since the last merge
	journal *runJournal // set when the run is durable (or replayed)
	run     *run        // the run this is the link of
}

// rollup is what finished sub-runs add to their parent run.
type rollup struct {
	usage    llm.Usage
	cost     float64
	unpriced bool // a sub-run's model had no price
	calls    []ModelCall
}

// withRun puts r in ctx, once: as the policy's Host (policy.WithHost),
// which is also how the run's tools and middleware find its link.
func withRun(ctx context.Context, r *run) context.Context {
	return policy.WithHost(ctx, r)
}

func linkFrom(ctx context.Context) *link {
	if r, ok := policy.HostFrom(ctx).(*run); ok {
		return &r.link
	}
	return nil
}

// add records a finished sub-run.
func (l *link) add(res *Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sub == nil {
		l.sub = &rollup{}
	}
	u := l.sub
	u.usage.Add(res.TokenUsage)
	if res.EstimatedCost != nil {
		u.cost += *res.EstimatedCost
	} else {
		u.unpriced = true
	}
	for _, c := range res.ModelCalls {
		if c.Agent == "" {
			c.Agent = res.AgentName
		}
		u.calls = append(u.calls, c)
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
	u := l.sub
	l.sub = nil
	l.pending.Store(false)
	r.st.Usage.Add(u.usage)
	r.st.CostUSD += u.cost
	r.unpriced = r.unpriced || u.unpriced
	for i := range u.calls {
		r.trace.calls = append(r.trace.calls, callRec{full: &u.calls[i]})
	}
}

// subTool makes an agent callable as a tool of another.
type subTool struct{ a *Agent }

func (t subTool) Info() tool.Info {
	desc := t.a.spec.Description
	if desc == "" {
		desc = "Ask the " + t.a.spec.AgentName + " agent."
	}
	// Repeating a call with its key continues the same stored sub-run
	// (see Call): it deduplicates.
	return tool.Info{Name: t.a.spec.AgentName, Description: desc, Parameters: t.a.spec.InputJSONSchema(),
		Idempotency: tool.NonIdempotent, Deduplicates: true, Timeout: time.Duration(t.a.limits.TimeoutMS) * time.Millisecond}
}

// subRunID is the run id of the sub-run a stored run's call starts: one
// per call, derived from its idempotency key, so that the call made
// again after a crash finds the run it started.
func subRunID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "run_" + hex.EncodeToString(sum[:8])
}

// Call runs the sub-agent in a session of its own, inside the caller's
// deadline, with its own limits, tightened to what remains of the
// parent's token, cost and tool-call budgets. It acts for the same user
// and correlation id. Its events carry its own agent name and the
// parent's run id; its usage and cost roll up into the parent's run.
// Its output is the call's result, under its output_name when the spec
// gives one.
func (t subTool) Call(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var input map[string]any
	if err := json.Unmarshal(args, &input); err != nil {
		return nil, &tool.ArgumentError{Tool: t.a.spec.AgentName, Problems: []string{"arguments are not a JSON object"}}
	}
	var opts []RunOption
	call := tool.CallFrom(ctx)
	if l := linkFrom(ctx); l != nil {
		opts = append(opts, WithEventBus(&l.run.s.bus), func(c *runConfig) { c.parent = l; c.inherit(l.run.s.cfg.extra, call) })
	}
	if c := call; c != nil {
		b := c.Budget
		opts = append(opts, func(rc *runConfig) { rc.more().parentBudget = &b })
		if c.Run != nil {
			opts = append(opts, WithUser(c.Run.UserID), WithCorrelationID(c.Run.CorrelationID),
				WithTraceContext(c.Run.TraceParent, c.Run.TraceState), WithMetadata(c.Run.Metadata))
		}
	}
	s, res, err := t.session(ctx, input, opts)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return nil, &tool.ArgumentError{Tool: t.a.spec.AgentName, Problems: ie.Problems}
		}
		return nil, err
	}
	var runErr error
	if res == nil {
		res, runErr = s.Run(ctx)
	} else if res.Error != nil {
		runErr = errors.New(res.Error.Message)
	}
	if l := linkFrom(ctx); l != nil {
		l.add(res)
	}
	if runErr != nil {
		return nil, &tool.ErrorDetails{Type: "agent_error", Recoverable: true,
			Message: fmt.Sprintf("agent %s did not finish: %v", t.a.spec.AgentName, runErr),
			Details: map[string]any{"terminate_reason": string(res.TerminateReason), "partial_result": res.RawContent}}
	}
	if name := t.a.spec.OutputName; name != "" {
		return json.Marshal(map[string]any{name: res.Result}) // the output under its name, as the spec names it
	}
	return json.Marshal(res.Result)
}

// session is the session that runs the call: a new one, or, when the
// calling run is stored, the sub-run of the call's key, stored in the
// same store. A sub-run that ended already gives its stored Result (res),
// one that was interrupted is resumed; so a call made again after a
// crash (deduplicated, or approved) never runs the sub-agent twice.
func (t subTool) session(ctx context.Context, input map[string]any, opts []RunOption) (*Session, *Result, error) {
	l, call := linkFrom(ctx), tool.CallFrom(ctx)
	if l == nil || l.journal == nil || l.journal.w == nil || call == nil {
		s, err := t.a.NewSession(input, opts...)
		return s, nil, err
	}
	st := l.run.s.cfg.store
	id := subRunID(call.Key())
	run, err := st.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s, err := t.a.NewSession(input, append(opts, WithStore(st))...)
		if err == nil {
			s.state.RunID = id
		}
		return s, nil, err
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %w", ErrStore, err)
	case run.Status.Resumable() || run.Status == store.Running:
		s, err := t.a.Resume(ctx, st, id, opts...)
		return s, nil, err
	}
	sub, err := runlog.Read(ctx, st, id, t.a.readOptions()...)
	if err != nil || sub.Result == nil {
		return nil, nil, fmt.Errorf("%w: sub-run %s is %s without a Result: %v", ErrStore, id, run.Status, err)
	}
	var res Result
	if err := json.Unmarshal(sub.Result, &res); err != nil {
		return nil, nil, fmt.Errorf("%w: sub-run %s: its Result: %w", ErrStore, id, err)
	}
	return nil, &res, nil
}

// inherit gives a sub-run its parent's seed and clock: a deterministic
// run's sub-agents are deterministic too. The seed is mixed with the
// call's key, so that two calls of one sub-agent with one input are two
// runs.
func (c *runConfig) inherit(e *runExtra, call *tool.Call) {
	if e == nil || !e.seeded && e.now.IsZero() {
		return
	}
	m := c.more()
	m.seeded, m.seedIDs, m.seed, m.now = e.seeded, e.seedIDs, e.seed, e.now
	if call != nil {
		m.seed = ids.Derive(m.seed, call.Key())
	}
}
