package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/internal/journal"
	"github.com/agentry/agentry/pipeline"
	"github.com/agentry/agentry/policy"
	"github.com/agentry/agentry/store"
)

// The names of the pipeline workflow and its activity: part of the
// contract with running workflows.
const (
	PipelineWorkflowName = "agentry.Pipeline"
	PipelineStepName     = "agentry.PipelineStep"
)

// PipelineRequest is what a pipeline's run on Temporal starts with: its
// definition as the submitter read it, the directories its paths start
// from, the input and who runs it.
type PipelineRequest struct {
	Definition json.RawMessage `json:"definition"`
	// BaseDir is where the definition's relative paths (inline specs'
	// scripted models, agents_dir) start; AgentsDir, when set, is where
	// its stages' agents are.
	BaseDir       string            `json:"base_dir,omitempty"`
	AgentsDir     string            `json:"agents_dir,omitempty"`
	Input         map[string]any    `json:"input"`
	UserID        string            `json:"user_id,omitempty"`
	Roles         []string          `json:"roles,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	TraceParent   string            `json:"trace_parent,omitempty"`
	TraceState    string            `json:"trace_state,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

// pipelineIn is one pipeline step's input.
type pipelineIn struct {
	RunID   string          `json:"run_id"`
	Driver  string          `json:"driver"`
	Request PipelineRequest `json:"request"`
	// State and Stage go on from where the last step stopped: its
	// state, and the Result of the stage's run it handed out.
	State json.RawMessage `json:"state,omitempty"`
	Stage json.RawMessage `json:"stage,omitempty"`
	Abort bool            `json:"abort,omitempty"`
}

// pipelineOut is where the pipeline stopped: ended, or before a stage
// whose run is handed out.
type pipelineOut struct {
	Ended  bool               `json:"ended,omitempty"`
	Status string             `json:"status,omitempty"`
	Result json.RawMessage    `json:"result,omitempty"`
	Stage  *pipeline.StageRun `json:"stage,omitempty"`
	State  json.RawMessage    `json:"state,omitempty"`
}

// StartPipeline starts a pipeline's run on the task queue and returns
// its id, its workflow's id. Each stage's agent runs as a run of its own
// (a child workflow), whose parent is the pipeline's.
func StartPipeline(ctx context.Context, c client.Client, taskQueue string, req PipelineRequest) (string, error) {
	if len(req.Definition) == 0 {
		return "", errors.New("temporal: the pipeline request has no definition")
	}
	return start(ctx, c, taskQueue, PipelineWorkflowName, req)
}

// runPipeline is the workflow of a pipeline's run: its steps (routing,
// outcomes, the envelope) are activities, each stage's agent run a
// child workflow of the agent run workflow.
func runPipeline(ctx workflow.Context, req PipelineRequest) (*Outcome, error) {
	info := workflow.GetInfo(ctx)
	if workflow.GetVersion(ctx, "agentry.pipeline", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil, temporal.NewNonRetryableApplicationError("this pipeline run was started by a release without versioned workflows", "unversioned", nil)
	}
	runID := info.WorkflowExecution.ID
	progress := Progress{RunID: runID, Status: string(store.Running)}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) { return progress, nil }); err != nil {
		return nil, err
	}
	in := pipelineIn{RunID: runID, Driver: "temporal:" + info.Namespace + "/" + runID, Request: req}
	for {
		out, err := pipelineStep(ctx, in)
		if err != nil {
			return nil, err
		}
		if out.Ended {
			return &Outcome{RunID: runID, Status: out.Status, Result: out.Result}, nil
		}
		progress.Running = []string{out.Stage.RunID}
		progress.Turn = out.Stage.Hop
		res, err := stageRun(ctx, req, out.Stage, info.TaskQueueName)
		if ctx.Err() != nil {
			in.Abort = true // the next step ends the run aborted
		} else if err != nil {
			return nil, err
		}
		in.State, in.Stage = out.State, res
	}
}

// pipelineStep runs one step; a cancelled workflow's last step ends the
// run aborted.
func pipelineStep(ctx workflow.Context, in pipelineIn) (*pipelineOut, error) {
	if ctx.Err() != nil {
		in.Abort = true
		ctx, _ = workflow.NewDisconnectedContext(ctx)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: advanceTimeout,
		HeartbeatTimeout:    heartbeatTimeout,
		WaitForCancellation: true, // a step cancelled mid-way is done before the abort
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{"config_error", "invalid_input", "not_resumable"}},
	})
	var out pipelineOut
	if err := workflow.ExecuteActivity(actx, PipelineStepName, in).Get(ctx, &out); err != nil {
		if ctx.Err() != nil && !in.Abort {
			return pipelineStep(ctx, in) // cancelled: once more, to end the run aborted
		}
		return nil, err
	}
	if ctx.Err() != nil && !in.Abort && !out.Ended {
		in.State, in.Stage = out.State, nil // cancelled as it handed a stage out: ended aborted instead
		return pipelineStep(ctx, in)
	}
	return &out, nil
}

// stageRun runs a stage's agent as a child workflow and returns its
// Result; a child that failed outright (its agent did not build) is a
// failed Result, which fails the stage as a local run's would.
func stageRun(ctx workflow.Context, req PipelineRequest, st *pipeline.StageRun, queue string) (json.RawMessage, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: st.RunID, TaskQueue: queue})
	r := Request{Agent: st.Agent, AgentsDir: st.AgentsDir, Spec: st.Spec, BaseDir: st.BaseDir, Input: st.Input,
		ParentRunID: st.ParentRunID, UserID: req.UserID, Roles: req.Roles, CorrelationID: req.CorrelationID,
		TraceParent: req.TraceParent, TraceState: req.TraceState, Metadata: req.Metadata, Seed: st.Seed}
	var out Outcome
	err := workflow.ExecuteChildWorkflow(cctx, WorkflowName, r, (*Carried)(nil)).Get(ctx, &out)
	if err == nil {
		return out.Result, nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	failed := agent.Result{ID: st.RunID, AgentName: st.Stage, Outcome: agent.OutcomeError, TerminateReason: agent.ReasonError,
		Error: &agent.ErrorInfo{Code: agent.CodeConfigError, Message: cause(err)}, Steps: []agent.Step{}}
	return json.Marshal(&failed)
}

// pipelineStep runs the pipeline from where it stopped until it ends or
// hands a stage's run out.
func (x *activities) pipelineStep(ctx context.Context, in pipelineIn) (*pipelineOut, error) {
	defer beat(ctx)()
	req := in.Request
	var def pipeline.Definition
	if err := json.Unmarshal(req.Definition, &def); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("pipeline run %s: its definition: %v", in.RunID, err), "config_error", err)
	}
	opts := []pipeline.Option{pipeline.WithAgentOptions(x.options()...)}
	if req.AgentsDir != "" {
		opts = append(opts, pipeline.WithAgentsDir(req.AgentsDir))
	}
	if x.cfg.EncryptionKey != nil {
		opts = append(opts, pipeline.WithEncryptionKey(x.cfg.EncryptionKey))
	}
	p, err := pipeline.New(&def, req.BaseDir, opts...)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("pipeline run %s: %v", in.RunID, err), "config_error", err)
	}
	defer p.Close()
	run, err := x.cfg.Store.Get(ctx, in.RunID)
	if err == nil && ended(run.Status) {
		return x.pipelineOutcome(ctx, run)
	}
	ctx = policy.WithPrincipal(ctx, policy.Principal{UserID: req.UserID, Roles: req.Roles})
	runOpts := []pipeline.RunOption{pipeline.WithStore(x.cfg.Store), pipeline.Drive(drive.Plan{RunID: in.RunID, Driver: in.Driver, Dispatch: true}),
		pipeline.WithSessionOptions(agent.WithUser(req.UserID), agent.WithCorrelationID(req.CorrelationID),
			agent.WithTraceContext(req.TraceParent, req.TraceState), agent.WithMetadata(req.Metadata))}
	if in.State != nil {
		res := agent.Result{Outcome: agent.OutcomePartial, TerminateReason: agent.ReasonAborted, Steps: []agent.Step{},
			Error: &agent.ErrorInfo{Code: agent.CodeAborted, Message: agent.ErrAborted.Error()}}
		if in.Stage != nil { // none when the stage was cut short by an abort
			res = agent.Result{}
			if err := json.Unmarshal(in.Stage, &res); err != nil {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("pipeline run %s: the stage's Result: %v", in.RunID, err), "config_error", err)
			}
		}
		runOpts = append(runOpts, pipeline.Continue(in.State, &res))
	}
	rctx := context.WithoutCancel(ctx)
	if in.Abort {
		c, cancel := context.WithCancelCause(rctx)
		cancel(agent.ErrAborted)
		rctx = c
	}
	res, err := p.Run(rctx, req.Input, runOpts...)
	var de *pipeline.DispatchError
	switch {
	case errors.As(err, &de):
		return &pipelineOut{Stage: &de.Stage, State: de.State}, nil
	case res == nil && errors.Is(err, pipeline.ErrInvalid):
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("pipeline run %s: %v", in.RunID, err), "config_error", err)
	case res == nil || errors.Is(err, journal.ErrStore):
		return nil, err // the store failed, or a later attempt took the run over: retried, or superseded
	}
	status, _ := res.StoreStatus()
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return &pipelineOut{Ended: true, Status: string(status), Result: b}, nil
}

// pipelineOutcome is the end of a pipeline run an earlier step ended.
func (x *activities) pipelineOutcome(ctx context.Context, run store.Run) (*pipelineOut, error) {
	out, err := x.outcome(ctx, run)
	if err != nil {
		return nil, err
	}
	return &pipelineOut{Ended: true, Status: out.Status, Result: out.Result}, nil
}
