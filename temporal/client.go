package temporal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentry/agentry/internal/ids"
)

// Register puts the run workflow and its activities on w, a worker of
// the task queue runs are started on.
func Register(w worker.Registry, cfg Config) error {
	if cfg.Store == nil {
		return errors.New("temporal: Config.Store is required: runs' logs are written to it")
	}
	x := &activities{cfg: cfg}
	w.RegisterWorkflowWithOptions(run, workflow.RegisterOptions{Name: WorkflowName})
	w.RegisterWorkflowWithOptions(runPipeline, workflow.RegisterOptions{Name: PipelineWorkflowName})
	w.RegisterActivityWithOptions(x.advance, activity.RegisterOptions{Name: AdvanceName})
	w.RegisterActivityWithOptions(x.tool, activity.RegisterOptions{Name: ToolName})
	w.RegisterActivityWithOptions(x.pipelineStep, activity.RegisterOptions{Name: PipelineStepName})
	return nil
}

// WorkerOptions are the options of a worker of agentry's workflows: the
// SDK's defaults, with room (10 s, not 1 s) for a workflow task that
// reads a large payload back from the store (DataConverter) before the
// SDK takes it for a deadlock.
func WorkerOptions() worker.Options {
	return worker.Options{DeadlockDetectionTimeout: 10 * time.Second}
}

// clientStarter is what starting a run needs of a client.
type clientStarter interface {
	ExecuteWorkflow(ctx context.Context, options client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error)
}

// start starts the workflow name of a new run on the task queue.
func start(ctx context.Context, c clientStarter, taskQueue, name string, args ...any) (string, error) {
	if taskQueue == "" {
		return "", errors.New("temporal: a task queue is required")
	}
	runID := ids.New("run")
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: runID, TaskQueue: taskQueue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE}, name, args...)
	if err != nil {
		return "", fmt.Errorf("temporal: start run %s: %w", runID, err)
	}
	return runID, nil
}

// Start starts a run on the task queue and returns its id, which is
// also its workflow's id.
func Start(ctx context.Context, c client.Client, taskQueue string, req Request) (string, error) {
	if len(req.Spec) == 0 && req.Agent == "" {
		return "", errors.New("temporal: the request names no agent: give its spec or its name")
	}
	return start(ctx, c, taskQueue, WorkflowName, req, (*Carried)(nil))
}

// Wait waits for the run's workflow to end (through its continuations)
// and returns its Outcome.
func Wait(ctx context.Context, c client.Client, runID string) (*Outcome, error) {
	var out Outcome
	if err := c.GetWorkflow(ctx, runID, "").Get(ctx, &out); err != nil {
		return nil, fmt.Errorf("temporal: run %s: %w", runID, err)
	}
	return &out, nil
}

// Await waits until the run ends, or pauses for a person's approval
// after its pause number after (Progress.Pauses; 0 for a run just
// started), and returns where it stopped: for a pause, the status
// awaiting_approval and the run's Result so far.
func Await(ctx context.Context, c client.Client, runID string, after int) (*Outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type ended struct {
		out *Outcome
		err error
	}
	done := make(chan ended, 1)
	go func() {
		out, err := Wait(ctx, c, runID)
		done <- ended{out, err}
	}()
	tick := time.NewTicker(awaitPoll)
	defer tick.Stop()
	for {
		select {
		case e := <-done:
			return e.out, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			if p, err := Query(ctx, c, runID); err == nil && p.Pauses > after && p.Status == "awaiting_approval" {
				return &Outcome{RunID: runID, Status: p.Status, Result: p.Result}, nil
			}
		}
	}
}

// awaitPoll is how often Await asks a run whether it paused.
const awaitPoll = 100 * time.Millisecond

// Decide approves or denies calls the run waits for. A decision that
// names no waiting call is refused, with the calls that wait.
func Decide(ctx context.Context, c client.Client, runID string, d Decision) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: runID, UpdateName: UpdateApprove,
		Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("temporal: decide run %s: %w", runID, err)
	}
	return nil
}

// Abort cancels the run's workflow: the run ends aborted, on record.
func Abort(ctx context.Context, c client.Client, runID string) error {
	if err := c.CancelWorkflow(ctx, runID, ""); err != nil {
		return fmt.Errorf("temporal: abort run %s: %w", runID, err)
	}
	return nil
}

// Running reports whether the run's workflow exists and goes on (a run
// started, perhaps not yet begun by a worker).
func Running(ctx context.Context, c client.Client, runID string) bool {
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// Query asks the run's workflow where the run stands.
func Query(ctx context.Context, c client.Client, runID string) (*Progress, error) {
	v, err := c.QueryWorkflow(ctx, runID, "", QueryProgress)
	if err != nil {
		return nil, fmt.Errorf("temporal: query run %s: %w", runID, err)
	}
	var p Progress
	if err := v.Get(&p); err != nil {
		return nil, err
	}
	return &p, nil
}
