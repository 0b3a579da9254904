package temporal

// The workflow of the first release (version 1), frozen: the upgrade
// test starts runs with it, as a worker of that release would, and lets
// the current code finish them. Its types are frozen copies too, so
// that what the old workflow sends the activities (and hands to the
// workflow it continues as) is checked against what this release reads.
// Never edit this file: a release that changes the workflow adds a copy
// of its own.

import (
	"encoding/json"
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

type RequestV1 struct {
	Spec          json.RawMessage   `json:"spec,omitempty"`
	Agent         string            `json:"agent,omitempty"`
	BaseDir       string            `json:"base_dir,omitempty"`
	Model         string            `json:"model,omitempty"`
	Input         map[string]any    `json:"input"`
	SessionID     string            `json:"session_id,omitempty"`
	UserID        string            `json:"user_id,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	TraceParent   string            `json:"trace_parent,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

type DecisionV1 struct {
	Approve []string `json:"approve,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	By      string   `json:"by,omitempty"`
}

type ProgressV1 struct {
	RunID     string                `json:"run_id"`
	Status    string                `json:"status"`
	Turn      int                   `json:"turn"`
	Tokens    int                   `json:"tokens"`
	CostUSD   *float64              `json:"cost_usd,omitempty"`
	ToolCalls int                   `json:"tool_calls"`
	Running   []string              `json:"running,omitempty"`
	Waiting   []agent.ApprovalError `json:"waiting,omitempty"`
	Pauses    int                   `json:"pauses"`
	Result    json.RawMessage       `json:"result,omitempty"`
}

type OutcomeV1 struct {
	RunID  string          `json:"run_id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
}

type advanceInV1 struct {
	RunID    string                       `json:"run_id"`
	Driver   string                       `json:"driver"`
	Request  *RequestV1                   `json:"request,omitempty"`
	Results  map[string]runlog.ToolResult `json:"results,omitempty"`
	Decision *DecisionV1                  `json:"decision,omitempty"`
	Abort    bool                         `json:"abort,omitempty"`
}

type advanceOutV1 struct {
	Status    string                `json:"status"`
	Ended     bool                  `json:"ended,omitempty"`
	Calls     []drive.PendingCall   `json:"calls,omitempty"`
	Waiting   []agent.ApprovalError `json:"waiting,omitempty"`
	Run       tool.Run              `json:"run"`
	Result    json.RawMessage       `json:"result,omitempty"`
	Turn      int                   `json:"turn"`
	Tokens    int                   `json:"tokens"`
	CostUSD   *float64              `json:"cost_usd,omitempty"`
	ToolCalls int                   `json:"tool_calls"`
}

type toolInV1 struct {
	Run  tool.Run          `json:"run"`
	Call drive.PendingCall `json:"call"`
}

type CarriedV1 struct {
	Results  map[string]runlog.ToolResult `json:"results,omitempty"`
	Decision *DecisionV1                  `json:"decision,omitempty"`
}

// run is the workflow of one agent run: the loop as Temporal sees it.
func runV1(ctx workflow.Context, req RequestV1, carried *CarriedV1) (*OutcomeV1, error) {
	info := workflow.GetInfo(ctx)
	runID := info.WorkflowExecution.ID
	w := &runStateV1{req: &req, progress: ProgressV1{RunID: runID, Status: string(store.Running)}}
	if workflow.GetVersion(ctx, "agentry.run", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil, temporal.NewNonRetryableApplicationError("this run was started by a release without versioned workflows", "unversioned", nil)
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (ProgressV1, error) { return w.progress, nil }); err != nil {
		return nil, err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateApprove, w.decide,
		workflow.UpdateHandlerOptions{Validator: w.validate}); err != nil {
		return nil, err
	}
	in := advanceInV1{RunID: runID, Driver: "temporal:" + info.Namespace + "/" + runID}
	if carried == nil {
		in.Request = &req
	} else {
		in.Results, in.Decision = carried.Results, carried.Decision
	}
	for {
		out, err := w.advance(ctx, in)
		if err != nil {
			return nil, err
		}
		if out.Ended {
			return &OutcomeV1{RunID: runID, Status: out.Status, Result: out.Result}, nil
		}
		next := advanceInV1{RunID: in.RunID, Driver: in.Driver}
		if len(out.Calls) > 0 {
			next.Results = w.runTools(ctx, out)
		}
		if len(out.Waiting) > 0 && ctx.Err() == nil {
			next.Decision = w.await(ctx)
		}
		if ctx.Err() != nil {
			return w.abort(ctx, next)
		}
		if n := workflow.GetInfo(ctx).GetCurrentHistoryLength(); n > 10_000 || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return nil, workflow.NewContinueAsNewError(ctx, WorkflowName, req, &CarriedV1{Results: next.Results, Decision: next.Decision})
		}
		in = next
	}
}

// runStateV1 is what a run's workflow knows between its activities.
type runStateV1 struct {
	req      *RequestV1
	progress ProgressV1
	decision *DecisionV1 // the decision the approve update gave, until used
}

// advance runs the planning activity and notes where the run stands.
func (w *runStateV1) advance(ctx workflow.Context, in advanceInV1) (*advanceOutV1, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    10 * time.Second,
		WaitForCancellation: true, // a cancelled activity aborts the run itself
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{"config_error", "invalid_input", "not_resumable"}},
	})
	var out advanceOutV1
	err := workflow.ExecuteActivity(actx, AdvanceName, in).Get(ctx, &out)
	if err != nil {
		if ctx.Err() != nil {
			return w.advance(abortCtxV1(ctx), advanceInV1{RunID: in.RunID, Driver: in.Driver, Results: in.Results, Abort: true})
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
func (w *runStateV1) abort(ctx workflow.Context, in advanceInV1) (*OutcomeV1, error) {
	in.Abort, in.Decision = true, nil
	out, err := w.advance(abortCtxV1(ctx), in)
	if err != nil {
		return nil, err
	}
	return &OutcomeV1{RunID: in.RunID, Status: out.Status, Result: out.Result}, nil
}

// abortCtxV1 is a context that outlives the workflow's cancellation, for
// the activity that records the abort.
func abortCtxV1(ctx workflow.Context) workflow.Context {
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
func (w *runStateV1) runTools(ctx workflow.Context, out *advanceOutV1) map[string]runlog.ToolResult {
	run := out.Run
	run.UserID, run.CorrelationID, run.TraceParent, run.Metadata = w.req.UserID, w.req.CorrelationID, w.req.TraceParent, w.req.Metadata
	if tp := strings.Split(run.TraceParent, "-"); len(tp) == 4 {
		run.TraceID = tp[1]
	}
	futures := make([]workflow.Future, len(out.Calls))
	for i, c := range out.Calls {
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, toolOptionsV1(c)), ToolName, toolInV1{Run: run, Call: c})
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
					Message: fmt.Sprintf("the call %s (%s) could not be run: %v", c.CallID, c.Tool, causeV1(err))}}
		}
	}
	return results
}

// causeV1 is the message of an activity's failure, without Temporal's
// wrapping.
func causeV1(err error) string {
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

// toolOptionsV1 are the options of a call's activity: one attempt for a
// non-idempotent call whose tool does not deduplicate; a few for any
// other (a worker that died), each bounded by the call's timeout.
func toolOptionsV1(c drive.PendingCall) workflow.ActivityOptions {
	limit := time.Hour
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
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: attempts},
	}
}

// await waits for the approve update's decision, or the workflow's
// cancellation (nil).
func (w *runStateV1) await(ctx workflow.Context) *DecisionV1 {
	if err := workflow.Await(ctx, func() bool { return w.decision != nil }); err != nil {
		return nil
	}
	d := w.decision
	w.decision = nil
	return d
}

// validate refuses a decision that names no waiting call.
func (w *runStateV1) validate(_ workflow.Context, d DecisionV1) error {
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
			return fmt.Errorf("%q names %d of the calls run %s waits for (%s)", id, n, w.progress.RunID, describeV1(w.progress.Waiting))
		}
	}
	return nil
}

// decide takes a decision for the run's next planning activity.
func (w *runStateV1) decide(_ workflow.Context, d DecisionV1) error {
	w.decision = &d
	return nil
}

func describeV1(calls []agent.ApprovalError) string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.CallID + " (" + c.Tool + ", key " + c.Key + ")"
	}
	return strings.Join(out, ", ")
}
