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
	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// Carried is what a run's workflow hands to the workflow it continues
// as (continue-as-new): the results and the decision its next planning
// activity is to be given. Everything else is in the run's log.
type Carried struct {
	Results    map[string]runlog.ToolResult `json:"results,omitempty"`
	Decision   *Decision                    `json:"decision,omitempty"`
	Since      time.Time                    `json:"since,omitzero"`
	RanThrough int                          `json:"ran_through,omitempty"`
}

// The versions of the workflow's code (workflow.GetVersion): a run
// started on one release replays on the next with the code paths it
// took. Each change of what the workflow schedules adds one.
const (
	changeID = "agentry.run"
	// version1 is the first release's loop.
	version1 = 1
	// version2: a turn that hands calls out while others of it wait for
	// a person goes on with their results at once, and pauses (as a
	// local run does) in the planning activity that follows, where
	// version 1 waited for the decision before it.
	version2 = 2
	// latest is the version new runs take.
	latest = version2
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
	if w.version = workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, latest); w.version == workflow.DefaultVersion {
		return nil, temporal.NewNonRetryableApplicationError("this run was started by a release without versioned workflows", "unversioned", nil)
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) { return w.progress, nil }); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateApprove, w.decide,
		workflow.UpdateHandlerOptions{Validator: w.validate}); err != nil {
		return nil, err
	}
	in := w.next(advanceIn{RunID: runID, Driver: "temporal:" + info.Namespace + "/" + runID, Since: workflow.Now(ctx)})
	if carried == nil {
		in.Request = &req
	} else {
		in.Results, in.Decision, in.Since, w.ranThrough = carried.Results, carried.Decision, carried.Since, carried.RanThrough
		ran := w.ranThrough
		in.RanThrough = &ran
	}
	for {
		out, err := w.advance(ctx, in)
		if err != nil {
			return nil, err
		}
		if out.Ended {
			return &Outcome{RunID: runID, Status: out.Status, Result: out.Result}, nil
		}
		var results map[string]runlog.ToolResult
		if len(out.Calls) > 0 {
			results = w.runTools(ctx, out)
		}
		next := w.next(in) // after the calls: the turns they are of ran
		next.Results = results
		switch {
		case ctx.Err() != nil:
		case len(out.Waiting) > 0 && (w.version < version2 || len(out.Calls) == 0):
			next.Decision, next.Since = w.await(ctx), workflow.Now(ctx)
		case w.decision != nil: // given while the calls ran
			next.Decision, next.Since, w.decision = w.decision, workflow.Now(ctx), nil
		}
		if ctx.Err() != nil {
			return w.abort(ctx, next)
		}
		if n := workflow.GetInfo(ctx).GetCurrentHistoryLength(); n > continueAfter || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return nil, workflow.NewContinueAsNewError(ctx, WorkflowName, req, &Carried{Results: next.Results, Decision: next.Decision,
				Since: next.Since, RanThrough: w.ranThrough})
		}
		in = next
	}
}

// next is the input of the planning activity after in's: the same run,
// driver and clock, who runs it, and the last turn whose calls ran.
func (w *runState) next(in advanceIn) advanceIn {
	if w.version < version2 {
		return advanceIn{RunID: in.RunID, Driver: in.Driver, Since: in.Since}
	}
	ran := w.ranThrough
	return advanceIn{RunID: in.RunID, Driver: in.Driver, Since: in.Since, RanThrough: &ran,
		UserID: w.req.UserID, Roles: w.req.Roles}
}

// runState is what a run's workflow knows between its activities.
type runState struct {
	req        *Request
	version    workflow.Version // of the workflow's code the run started with
	progress   Progress
	decision   *Decision // the decision the approve update gave, until used
	ranThrough int       // the last turn whose calls were handed to their activities
	// planning counts the planning activities begun, planned those that
	// answered: one is in flight while they differ.
	planning, planned int
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
	w.planning++
	err := workflow.ExecuteActivity(actx, AdvanceName, in).Get(ctx, &out)
	w.planned = w.planning
	if err != nil {
		if ctx.Err() != nil && !in.Abort {
			// Cancelled: the run ends aborted (begun, if it had not).
			in.Request, in.Decision, in.Abort = w.req, nil, true
			return w.advance(abortCtx(ctx), in)
		}
		return nil, err
	}
	p := &w.progress
	p.Status, p.Waiting, p.Running = out.Status, out.Waiting, nil
	switch {
	case len(out.Waiting) > 0 && len(out.Calls) > 0 && w.version >= version2:
		// Its calls run first; the run pauses in the planning activity
		// that follows, with the Result of a pause.
		p.Status = string(store.Running)
	case len(out.Waiting) > 0:
		p.Pauses++
		p.Result = out.Result
	case out.Result != nil:
		p.Result = out.Result
	}
	p.Turn, p.Tokens, p.CostUSD, p.ToolCalls = out.Turn, out.Tokens, out.CostUSD, out.ToolCalls
	return &out, nil
}

// abort ends the run as aborted, after its workflow was cancelled: its
// last activity goes on with what the run has and stops at once.
func (w *runState) abort(ctx workflow.Context, in advanceIn) (*Outcome, error) {
	in.Abort, in.Decision, in.Request = true, nil, w.req
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
	run.UserID, run.CorrelationID, run.Metadata = w.req.UserID, w.req.CorrelationID, w.req.Metadata
	run.TraceParent, run.TraceState = w.req.TraceParent, w.req.TraceState
	if tp := strings.Split(run.TraceParent, "-"); len(tp) == 4 {
		run.TraceID = tp[1]
	}
	futures := make([]workflow.Future, len(out.Calls))
	for i, c := range out.Calls {
		w.ranThrough = max(w.ranThrough, c.Turn)
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
func toolOptions(c drive.PendingCall) workflow.ActivityOptions {
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

// validate refuses a decision that decides nothing, and one given while
// another waits to be applied; when the run waits, one that names no
// waiting call (each id must name exactly one).
func (w *runState) validate(_ workflow.Context, d Decision) error {
	if len(d.Approve)+len(d.Deny) == 0 {
		return errors.New("the decision approves and denies nothing")
	}
	if w.decision != nil {
		return fmt.Errorf("run %s has a decision not yet applied: decide again once it waits again", w.progress.RunID)
	}
	if len(w.progress.Waiting) == 0 {
		if w.planning == w.planned {
			return fmt.Errorf("run %s waits for no decision", w.progress.RunID)
		}
		// A planning activity is in flight: the pause it makes may be on
		// record before the workflow knows of it. decide waits for its
		// answer, and takes the decision only if it paused.
		return nil
	}
	_, err := w.bind(d)
	return err
}

// bind is d with each id (a key, or a call id naming one waiting call)
// made the key of the call it names.
func (w *runState) bind(d Decision) (Decision, error) {
	keyOf := func(id string) (string, error) {
		var keys []string
		for _, c := range w.progress.Waiting {
			if c.Key == id || c.CallID == id {
				keys = append(keys, c.Key)
			}
		}
		if len(keys) != 1 {
			return "", fmt.Errorf("%q names %d of the calls run %s waits for (%s)", id, len(keys), w.progress.RunID, describe(w.progress.Waiting))
		}
		return keys[0], nil
	}
	out := Decision{Reason: d.Reason, By: d.By}
	for _, id := range d.Approve {
		k, err := keyOf(id)
		if err != nil {
			return Decision{}, err
		}
		out.Approve = append(out.Approve, k)
	}
	for _, id := range d.Deny {
		k, err := keyOf(id)
		if err != nil {
			return Decision{}, err
		}
		out.Deny = append(out.Deny, k)
	}
	return out, nil
}

// decide takes a decision, bound to the waiting calls' keys, for the
// run's next planning activity; until the run waits again, it takes
// no other. Given just as the run paused (its pause in the store, its
// planning activity's answer not yet here), it waits for the pause.
func (w *runState) decide(ctx workflow.Context, d Decision) error {
	if len(w.progress.Waiting) == 0 {
		inFlight := w.planning
		if err := workflow.Await(ctx, func() bool { return w.planned >= inFlight || w.decision != nil }); err != nil {
			return err
		}
	}
	if w.decision != nil {
		return fmt.Errorf("run %s has a decision not yet applied: decide again once it waits again", w.progress.RunID)
	}
	if len(w.progress.Waiting) == 0 {
		return fmt.Errorf("run %s waits for no decision", w.progress.RunID)
	}
	bound, err := w.bind(d)
	if err != nil {
		return err
	}
	w.decision = &bound
	w.progress.Waiting = nil // decided: the next decision is for the next pause
	return nil
}

func describe(calls []agent.ApprovalError) string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.CallID + " (" + c.Tool + ", key " + c.Key + ")"
	}
	return strings.Join(out, ", ")
}
