package temporal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// Carried is what a run's workflow hands to the workflow it continues
// as (continue-as-new): the results and the decision its next planning
// activity is to be given. Everything else is in the run's log.
type Carried struct {
	Results  map[string]runlog.ToolResult `json:"results,omitempty"`
	Decision *Decision                    `json:"decision,omitempty"`
	Since    time.Time                    `json:"since,omitzero"`
}

// The versions of the workflow's code (workflow.GetVersion): a run
// started on one release replays on the next with the code paths it
// took. Each change of what the workflow schedules adds one.
const (
	changeID = "agentry.run"
	// version1 is the first release's loop.
	version1 = 1
	// latest is the version new runs take.
	latest = version1
)

// continueAfter is how many events a run's history may hold before it
// continues as new, unless Temporal suggests it sooner: far below the
// server's limits (50,000 events, 50 MB), so a run's history stays
// quick to replay. A variable for the tests' sake only.
var continueAfter = 10_000

// run is the workflow of one agent run: the loop as Temporal sees it.
func run(ctx workflow.Context, req Request, carried *Carried) (*Outcome, error) {
	info := workflow.GetInfo(ctx)
	runID := info.WorkflowExecution.ID
	w := &runState{req: &req, progress: Progress{RunID: runID, Status: string(store.Running)}}
	if workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, latest) == workflow.DefaultVersion {
		return nil, temporal.NewNonRetryableApplicationError("this run was started by a release without versioned workflows", "unversioned", nil)
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) { return w.progress, nil }); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateApprove, w.decide,
		workflow.UpdateHandlerOptions{Validator: w.validate}); err != nil {
		return nil, err
	}
	in := advanceIn{RunID: runID, Driver: "temporal:" + info.Namespace + "/" + runID, Since: workflow.Now(ctx)}
	if carried == nil {
		in.Request = &req
	} else {
		in.Results, in.Decision, in.Since = carried.Results, carried.Decision, carried.Since
	}
	for {
		out, err := w.advance(ctx, in)
		if err != nil {
			return nil, err
		}
		if out.Ended {
			return &Outcome{RunID: runID, Status: out.Status, Result: out.Result}, nil
		}
		next := advanceIn{RunID: in.RunID, Driver: in.Driver, Since: in.Since}
		if len(out.Calls) > 0 {
			next.Results = w.runTools(ctx, out)
		}
		if len(out.Waiting) > 0 && ctx.Err() == nil {
			next.Decision, next.Since = w.await(ctx), workflow.Now(ctx)
		}
		if ctx.Err() != nil {
			return w.abort(ctx, next)
		}
		if n := workflow.GetInfo(ctx).GetCurrentHistoryLength(); n > continueAfter || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return nil, workflow.NewContinueAsNewError(ctx, WorkflowName, req, &Carried{Results: next.Results, Decision: next.Decision, Since: next.Since})
		}
		in = next
	}
}

// runState is what a run's workflow knows between its activities.
type runState struct {
	req      *Request
	progress Progress
	decision *Decision // the decision the approve update gave, until used
}

// advance runs the planning activity and notes where the run stands.
func (w *runState) advance(ctx workflow.Context, in advanceIn) (*advanceOut, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: advanceTimeout,
		HeartbeatTimeout:    heartbeatTimeout,
		WaitForCancellation: true, // a cancelled activity aborts the run itself
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{"config_error", "invalid_input", "not_resumable"}},
	})
	var out advanceOut
	err := workflow.ExecuteActivity(actx, AdvanceName, in).Get(ctx, &out)
	if err != nil {
		if ctx.Err() != nil {
			return w.advance(abortCtx(ctx), advanceIn{RunID: in.RunID, Driver: in.Driver, Results: in.Results, Abort: true})
		}
		return nil, err
	}
	p := &w.progress
	p.Status, p.Waiting, p.Running = out.Status, out.Waiting, nil
	if len(out.Waiting) > 0 {
		p.Pauses++
	}
	if out.Result != nil {
		p.Result = out.Result
	}
	p.Turn, p.Tokens, p.CostUSD, p.ToolCalls = out.Turn, out.Tokens, out.CostUSD, out.ToolCalls
	return &out, nil
}

// abort ends the run as aborted, after its workflow was cancelled: its
// last activity goes on with what the run has and stops at once.
func (w *runState) abort(ctx workflow.Context, in advanceIn) (*Outcome, error) {
	in.Abort, in.Decision = true, nil
	out, err := w.advance(abortCtx(ctx), in)
	if err != nil {
		return nil, err
	}
	return &Outcome{RunID: in.RunID, Status: out.Status, Result: out.Result}, nil
}

// abortCtx is a context that outlives the workflow's cancellation, for
// the activity that records the abort.
func abortCtx(ctx workflow.Context) workflow.Context {
	if ctx.Err() == nil {
		return ctx
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return dctx
}

// runTools runs the calls a turn handed out, each an activity, in
// parallel, and returns their results by key. A call whose activity
// failed has no result when it is non-idempotent (its outcome is
// unknown: the run pauses for approval, or sends it again with its key
// when its tool deduplicates); any other call gets an error result the
// model sees.
func (w *runState) runTools(ctx workflow.Context, out *advanceOut) map[string]runlog.ToolResult {
	run := out.Run
	run.UserID, run.CorrelationID, run.TraceParent, run.Metadata = w.req.UserID, w.req.CorrelationID, w.req.TraceParent, w.req.Metadata
	if tp := strings.Split(run.TraceParent, "-"); len(tp) == 4 {
		run.TraceID = tp[1]
	}
	futures := make([]workflow.Future, len(out.Calls))
	for i, c := range out.Calls {
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, toolOptions(c)), ToolName, toolIn{Run: run, Call: c})
		w.progress.Running = append(w.progress.Running, c.Key)
	}
	results := make(map[string]runlog.ToolResult, len(out.Calls))
	for i, c := range out.Calls {
		var rec runlog.ToolResult
		err := futures[i].Get(ctx, &rec)
		w.progress.Running = slices.DeleteFunc(w.progress.Running, func(k string) bool { return k == c.Key })
		switch {
		case err == nil:
			results[c.Key] = rec
		case c.Idempotency == tool.NonIdempotent || ctx.Err() != nil:
			// Unknown outcome: the run decides from its log.
		default:
			results[c.Key] = runlog.ToolResult{CallID: c.CallID, Tool: c.Tool, Arguments: string(c.Arguments),
				StartedAt: workflow.Now(ctx), Error: &tool.ErrorDetails{Type: "tool_unavailable", Recoverable: true,
					Message: fmt.Sprintf("the call %s (%s) could not be run: %v", c.CallID, c.Tool, cause(err))}}
		}
	}
	return results
}

// cause is the message of an activity's failure, without Temporal's
// wrapping.
func cause(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Error()
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "its task timed out (" + to.TimeoutType().String() + ")"
	}
	return err.Error()
}

// toolOptions are the options of a call's activity: one attempt for a
// non-idempotent call whose tool does not deduplicate; a few for any
// other (a worker that died), each bounded by the call's timeout.
func toolOptions(c agent.PendingCall) workflow.ActivityOptions {
	limit := defaultToolLimit
	if c.Timeout > 0 {
		limit = 4*c.Timeout + time.Minute // the tool's own retries, each with its timeout
	}
	attempts := int32(3)
	if c.Idempotency == tool.NonIdempotent && !c.Deduplicates {
		attempts = 1
	}
	return workflow.ActivityOptions{
		ActivityID:          "tool:" + c.Key,
		StartToCloseTimeout: limit,
		HeartbeatTimeout:    heartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: attempts},
	}
}

// await waits for the approve update's decision, or the workflow's
// cancellation (nil).
func (w *runState) await(ctx workflow.Context) *Decision {
	if err := workflow.Await(ctx, func() bool { return w.decision != nil }); err != nil {
		return nil
	}
	d := w.decision
	w.decision = nil
	return d
}

// validate refuses a decision that names no waiting call.
func (w *runState) validate(_ workflow.Context, d Decision) error {
	if len(d.Approve)+len(d.Deny) == 0 {
		return errors.New("the decision approves and denies nothing")
	}
	if len(w.progress.Waiting) == 0 {
		return fmt.Errorf("run %s waits for no decision", w.progress.RunID)
	}
	for _, id := range append(slices.Clone(d.Approve), d.Deny...) {
		n := 0
		for _, c := range w.progress.Waiting {
			if c.Key == id || c.CallID == id {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%q names %d of the calls run %s waits for (%s)", id, n, w.progress.RunID, describe(w.progress.Waiting))
		}
	}
	return nil
}

// decide takes a decision for the run's next planning activity.
func (w *runState) decide(_ workflow.Context, d Decision) error {
	w.decision = &d
	return nil
}

func describe(calls []agent.WaitingCall) string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.CallID + " (" + c.Tool + ", key " + c.Key + ")"
	}
	return strings.Join(out, ", ")
}
