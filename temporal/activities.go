package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// Config is what a worker runs agents with.
type Config struct {
	// Store is the run store every run's log is written to: the same
	// store (Postgres) for every worker and server of a deployment.
	Store store.Store
	// Agents is the directory of agents a Request may name, and that
	// agent:NAME tools are found in.
	Agents string
	// Options are given to every agent the worker builds: its tools
	// (agent.WithTools), prompt store, memory, logger, telemetry.
	Options []agent.Option
	// EncryptionKey is the key that seals the runs' logs (Options'
	// agent.WithEncryptionKey seals the agents'): the worker reads the
	// end of a sealed run with it, and seals the pipelines' logs.
	EncryptionKey []byte
}

// activities are the worker's side of a run: they build agents and write
// runs' logs.
type activities struct {
	cfg Config
}

// options are the options a run's agent is built with on this worker.
func (x *activities) options(more ...agent.Option) []agent.Option {
	opts := append([]agent.Option(nil), x.cfg.Options...)
	if x.cfg.Agents != "" {
		opts = append(opts, agent.WithAgents(spec.Dir{Path: x.cfg.Agents}))
	}
	return append(opts, more...)
}

// build builds the agent a Request starts.
func (x *activities) build(req *Request) (*agent.Agent, error) {
	var opts []agent.Option
	if req.BaseDir != "" {
		opts = append(opts, agent.WithBaseDir(req.BaseDir))
	}
	if req.Model != "" {
		opts = append(opts, agent.WithModel(req.Model))
	}
	switch {
	case len(req.Spec) > 0 && req.Agent != "":
		return nil, errors.New("the request gives both a spec and an agent's name: give one")
	case len(req.Spec) > 0:
		sp, err := spec.Parse("request", req.Spec)
		if err != nil {
			return nil, err
		}
		return agent.New(sp, x.options(opts...)...)
	case req.Agent != "":
		dir := req.AgentsDir
		if dir == "" {
			dir = x.cfg.Agents
		}
		if dir == "" {
			return nil, fmt.Errorf("agent %q: this worker has no agents directory (Config.Agents)", req.Agent)
		}
		return agent.FromDir(dir, req.Agent, x.options(opts...)...)
	}
	return nil, errors.New("the request names no agent: give its spec or its name")
}

// advance goes on with a run from its log until it hands calls out,
// waits for a person, or ends (the planning activity: one model turn).
func (x *activities) advance(ctx context.Context, in advanceIn) (*advanceOut, error) {
	defer beat(ctx)()
	st := x.cfg.Store
	// Who runs it: the policy's access rules and memory scopes read the
	// principal, as in a local run.
	p := policy.Principal{UserID: in.UserID, Roles: in.Roles}
	if r := in.Request; r != nil && p.UserID == "" && p.Roles == nil {
		p = policy.Principal{UserID: r.UserID, Roles: r.Roles}
	}
	ctx = policy.WithPrincipal(ctx, p)
	run, err := st.Get(ctx, in.RunID)
	var a *agent.Agent
	var sess *agent.Session
	switch {
	case errors.Is(err, store.ErrNotFound) && in.Request != nil:
		if a, err = x.build(in.Request); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s: %v", in.RunID, err), "config_error", err)
		}
		defer a.Close()
		if p := a.Spec().Policy; p != nil && len(p.PrivateTools) > 0 {
			err := fmt.Errorf("agent %s has private tools (policy.private_tools): its log keeps their digests, from which a run cannot go on between activities; run it locally", a.Name())
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s: %v", in.RunID, err), "config_error", err)
		}
		sess, err = a.NewSession(in.Request.Input, x.sessionOptions(in, in.Request, a.Limits())...)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s: %v", in.RunID, err), "invalid_input", err)
		}
	case err != nil:
		return nil, err
	case ended(run.Status):
		return x.outcome(ctx, run) // this activity's last attempt ended it, and died before saying so
	default:
		if a, err = agent.Stored(ctx, st, in.RunID, x.options()...); err != nil {
			return nil, err
		}
		defer a.Close()
		if sess, err = a.Resume(ctx, st, in.RunID, x.sessionOptions(in, nil, a.Limits())...); err != nil {
			if errors.Is(err, agent.ErrNoSuchCall) || errors.Is(err, agent.ErrNotResumable) && !errors.Is(err, store.ErrHeld) {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s: %v", in.RunID, err), "not_resumable", err)
			}
			return nil, err
		}
	}
	if in.Abort {
		sess.Abort()
	}
	res, runErr := x.drive(ctx, sess)
	return x.stopped(sess, res, runErr)
}

// sessionOptions are those of the run's session in this activity.
func (x *activities) sessionOptions(in advanceIn, req *Request, limits spec.Limits) []agent.RunOption {
	plan := drive.Plan{Dispatch: true, Driver: in.Driver, Results: in.Results, RanThrough: in.RanThrough}
	if t := time.Duration(limits.TimeoutMS) * time.Millisecond; t > 0 && !in.Since.IsZero() {
		// The run's timeout counts from when it last went on by itself,
		// not from this activity's start.
		plan.Deadline = in.Since.Add(t)
	}
	if req != nil {
		plan.RunID = in.RunID
	}
	opts := []agent.RunOption{agent.WithStore(x.cfg.Store), agent.Drive(plan)}
	if req != nil {
		opts = append(opts, agent.WithSessionID(req.SessionID), agent.WithUser(req.UserID),
			agent.WithCorrelationID(req.CorrelationID), agent.WithTraceContext(req.TraceParent, req.TraceState), agent.WithMetadata(req.Metadata),
			agent.WithParentRunID(req.ParentRunID))
		if req.Seed != nil {
			opts = append(opts, agent.WithSeed(*req.Seed))
		}
		if req.Conversation != "" {
			opts = append(opts, agent.WithConversation(req.Conversation))
		}
	}
	if d := in.Decision; d != nil {
		if len(d.Approve) > 0 {
			opts = append(opts, agent.Approve(d.Approve...))
		}
		if len(d.Deny) > 0 {
			opts = append(opts, agent.Deny(d.Deny...))
		}
		if d.Reason != "" {
			opts = append(opts, agent.WithDenyReason(d.Reason))
		}
		if d.By != "" {
			opts = append(opts, agent.DecidedBy(d.By))
		}
	}
	return opts
}

// drive runs the session apart from the activity's context: a worker
// that stops interrupts the run (its next attempt, on any worker, goes
// on from the log), a cancelled workflow aborts it.
func (x *activities) drive(ctx context.Context, sess *agent.Session) (*agent.Result, error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
		case <-activity.GetWorkerStopChannel(ctx):
			sess.Interrupt()
		case <-ctx.Done():
			// Only the workflow's cancellation aborts the run. A timeout,
			// heartbeats that failed, a paused or reset activity leave it
			// interrupted: the next attempt goes on from its log.
			if errors.As(context.Cause(ctx), new(*temporal.CanceledError)) {
				sess.Abort()
			} else {
				sess.Interrupt()
			}
		}
	}()
	res, err := sess.Run(context.WithoutCancel(ctx))
	close(done)
	wg.Wait()
	return res, err
}

// stopped says where the run stopped.
func (x *activities) stopped(sess *agent.Session, res *agent.Result, err error) (*advanceOut, error) {
	var de *drive.DispatchError
	switch {
	case errors.As(err, &de):
		out := &advanceOut{Status: string(store.Running), Calls: de.Calls, Run: runInfo(sess)}
		out.Result = partial(res)
		if res != nil && len(res.Waiting) > 0 {
			out.Waiting = res.Waiting
			out.Status = string(store.AwaitingApproval)
			out.Result, _ = json.Marshal(res) // what a person decides on, whole
		}
		out.used(res)
		return out, nil
	case errors.Is(err, agent.ErrInterrupted):
		return nil, temporal.NewApplicationError("the worker stopped: the run goes on from its log on the next attempt", "interrupted")
	case errors.Is(err, agent.ErrStore):
		return nil, err // the store failed, or a later attempt took the run over: retried, or superseded
	case res == nil:
		return nil, err
	}
	status, _ := res.StoreStatus()
	b, merr := json.Marshal(res)
	if merr != nil {
		return nil, merr
	}
	out := &advanceOut{Status: string(status), Run: runInfo(sess)}
	out.used(res)
	if status == store.AwaitingApproval {
		out.Waiting, out.Result = res.Waiting, b
		return out, nil
	}
	out.Ended, out.Result = true, b
	return out, nil
}

// used notes what the run used so far.
func (o *advanceOut) used(res *agent.Result) {
	if res == nil {
		return
	}
	o.Turn, o.Tokens, o.CostUSD, o.ToolCalls = res.Iterations, res.TokenUsage.TotalTokens, res.EstimatedCost, res.Metrics.ToolCalls
}

// outcome is the end of a run an earlier attempt ended, from its log.
func (x *activities) outcome(ctx context.Context, run store.Run) (*advanceOut, error) {
	var opts []runlog.Option
	if x.cfg.EncryptionKey != nil {
		s, err := runlog.NewSealer(x.cfg.EncryptionKey)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), "config_error", err)
		}
		opts = append(opts, runlog.Sealed(s))
	}
	l, err := runlog.Read(ctx, x.cfg.Store, run.ID, opts...)
	if err != nil {
		return nil, err
	}
	return &advanceOut{Status: string(run.Status), Ended: true, Result: l.Result}, nil
}

func ended(s store.Status) bool {
	return s == store.Completed || s == store.Failed || s == store.Aborted
}

// runInfo is what the session knows of the run for its tools; the
// workflow adds who runs it, from its Request.
func runInfo(sess *agent.Session) tool.Run {
	st := sess.State()
	return tool.Run{RunID: st.RunID, SessionID: st.SessionID, ParentRunID: st.ParentRunID,
		AgentName: st.AgentName, AgentVersion: st.AgentVersion}
}

// partialLimit caps the partial Result a turn puts in the workflow's
// history for the progress query: a longer one is left out (the store
// has it).
const partialLimit = 128 << 10

// partial is the partial Result for the progress query, without the
// transcript, or nil when it is too long.
func partial(res *agent.Result) json.RawMessage {
	if res == nil {
		return nil
	}
	cp := *res
	cp.Messages = nil
	b, err := json.Marshal(&cp)
	if err != nil || len(b) > partialLimit {
		return nil
	}
	return b
}

// tool runs one call the run handed out.
func (x *activities) tool(ctx context.Context, in toolIn) (runlog.ToolResult, error) {
	defer beat(ctx)()
	a, err := agent.Stored(ctx, x.cfg.Store, in.Run.RunID, x.options()...)
	if err != nil {
		return runlog.ToolResult{}, err
	}
	defer a.Close()
	return a.Exec(ctx, &in.Run, in.Call, nil), nil
}

// beat heartbeats the activity until the returned func is called: a
// worker that dies stops beating, and its activity is given to another.
func beat(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
