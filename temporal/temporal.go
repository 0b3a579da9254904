// Package temporal runs agents as Temporal workflows: runs that outlive
// the machine that started them, on workers that share the load.
//
// A run is one workflow, whose id is the run's id. The workflow is the
// loop as Temporal sees it: a planning activity (Advance) goes on with
// the run from its log, makes the turn's model call and hands the turn's
// tool calls out (drive.Plan.Dispatch); each call is an activity of its own
// (Tool); the next Advance records their results and plans the next
// turn. The run's log in agentry's store stays its only truth: trace,
// runs, replay and the server see a Temporal run like a local one, live.
// The workflow itself holds only keys and statuses, so its code is
// small, deterministic and versioned apart from the agent's: a run
// started by one release finishes on the next.
//
// Guarantees: a non-idempotent call's activity has one attempt, its
// idempotency key is RUN_ID:TURN:INDEX (the workflow's id and the
// activity's place in it) and its intent is committed before it is
// handed out; a call whose worker died is never sent again blindly: the
// run pauses for approval, as a local run does, unless its tool
// deduplicates by key, when it is sent again with the same key. Approval
// is the update "approve", abort a cancellation of the workflow, and the
// query "progress" says where the run stands.
//
// A pipeline's run is a workflow too (agentry.Pipeline): its steps are
// activities, each stage's agent run a child workflow of the run
// workflow, a run of its own.
//
// Register puts the workflows and their activities on a worker; Start,
// StartPipeline, Await, Wait, Decide, Abort and Query are the client's
// side; DataConverter keeps large payloads in the store (and seals them
// all with a key), Tracing traces workflows and activities replay-safely.
package temporal

import (
	"encoding/json"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/tool"
)

// The names Temporal knows agentry's workflow, activities, update and
// query by. They are part of the contract with running workflows: they
// never change.
const (
	WorkflowName  = "agentry.Run"
	AdvanceName   = "agentry.Advance"
	ToolName      = "agentry.Tool"
	UpdateApprove = "approve"
	QueryProgress = "progress"
)

// Request is what a run on Temporal starts with: the agent (its spec, or
// its name in the worker's agents directory), the input and who runs it.
type Request struct {
	// Spec is the agent's spec as it runs (a snapshot); Agent names one
	// in the worker's agents directory instead (NAME or NAME@VERSION).
	Spec  json.RawMessage `json:"spec,omitempty"`
	Agent string          `json:"agent,omitempty"`
	// AgentsDir is where Agent is found (the worker's agents directory
	// when empty). BaseDir is where the spec's relative paths (a
	// scripted model's file, prompt files) are found; Model overrides
	// its model.
	AgentsDir string         `json:"agents_dir,omitempty"`
	BaseDir   string         `json:"base_dir,omitempty"`
	Model     string         `json:"model,omitempty"`
	Input     map[string]any `json:"input"`
	// Conversation is the conversation the run is part of: it starts
	// from the conversation's history, read from the store as a local
	// run's is.
	Conversation string `json:"conversation,omitempty"`
	// Who runs it, as for a local run: Roles are the principal's (the
	// policy's access rules read them).
	SessionID     string            `json:"session_id,omitempty"`
	UserID        string            `json:"user_id,omitempty"`
	Roles         []string          `json:"roles,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	TraceParent   string            `json:"trace_parent,omitempty"`
	TraceState    string            `json:"trace_state,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// ParentRunID is the run this one is part of (a pipeline's, for a
	// stage's run); Seed the run's seed, for a deterministic one.
	ParentRunID string `json:"parent_run_id,omitempty"`
	Seed        *int64 `json:"seed,omitempty"`
}

// Decision approves or denies calls a run waits for (the "approve"
// update). Each id is a call's idempotency key, or the model's call id
// when it names one waiting call.
type Decision struct {
	Approve []string `json:"approve,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	// Reason is why the denied calls are denied; By who decided.
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// Progress is where a run stands (the "progress" query).
type Progress struct {
	RunID string `json:"run_id"`
	// Status is running, awaiting_approval or the status it ended with.
	Status string `json:"status"`
	// Turn is the loop turn; Tokens, CostUSD and ToolCalls what the run
	// used so far.
	Turn      int      `json:"turn"`
	Tokens    int      `json:"tokens"`
	CostUSD   *float64 `json:"cost_usd,omitempty"`
	ToolCalls int      `json:"tool_calls"`
	// Running are the keys of the calls running now; Waiting the calls
	// that wait for a person.
	Running []string              `json:"running,omitempty"`
	Waiting []agent.ApprovalError `json:"waiting,omitempty"`
	// Pauses counts the times the run paused for a person's approval.
	Pauses int `json:"pauses"`
	// Result is the run's partial Result as of its last turn (whole
	// while the run waits for a person).
	Result json.RawMessage `json:"result,omitempty"`
}

// Outcome is what a run's workflow returns: the run, how it ended and
// its Result, the same JSON a local run gives.
type Outcome struct {
	RunID  string          `json:"run_id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
}

// advanceIn is one planning activity's input.
type advanceIn struct {
	RunID  string `json:"run_id"`
	Driver string `json:"driver"`
	// Request starts the run (the first Advance of a workflow).
	Request *Request `json:"request,omitempty"`
	// Results are those of the calls handed out last, by key.
	Results  map[string]runlog.ToolResult `json:"results,omitempty"`
	Decision *Decision                    `json:"decision,omitempty"`
	Abort    bool                         `json:"abort,omitempty"`
	// Since is when the run last went on by itself (its start, or a
	// person's decision): its timeout (limits.timeout_ms) counts from
	// there, as a local run's counts from its start or resume.
	Since time.Time `json:"since,omitzero"`
	// RanThrough is the last turn whose calls were handed to activities
	// (drive.Plan.RanThrough); nil from a workflow of version 1.
	RanThrough *int `json:"ran_through,omitempty"`
	// Who runs the run (a continuing session's principal).
	UserID string   `json:"user_id,omitempty"`
	Roles  []string `json:"roles,omitempty"`
}

// advanceOut is where the run stopped.
type advanceOut struct {
	// Status is the run's store status: running (calls handed out),
	// awaiting_approval, or how it ended.
	Status  string                `json:"status"`
	Ended   bool                  `json:"ended,omitempty"`
	Calls   []drive.PendingCall   `json:"calls,omitempty"`
	Waiting []agent.ApprovalError `json:"waiting,omitempty"`
	// Run is what the run's tools see of it.
	Run    tool.Run        `json:"run"`
	Result json.RawMessage `json:"result,omitempty"`
	// What the run used so far, for the progress query.
	Turn      int      `json:"turn"`
	Tokens    int      `json:"tokens"`
	CostUSD   *float64 `json:"cost_usd,omitempty"`
	ToolCalls int      `json:"tool_calls"`
}

// toolIn is one call's activity input.
type toolIn struct {
	Run  tool.Run          `json:"run"`
	Call drive.PendingCall `json:"call"`
}

// Timeouts and retries of the activities. A worker that dies is found by
// its activities' missing heartbeats.
const (
	heartbeatEvery = 2 * time.Second
	// heartbeatTimeout leaves a loaded machine's heartbeats room: the
	// SDK sends them at most every 80% of it.
	heartbeatTimeout = 20 * time.Second
	advanceTimeout   = 30 * time.Minute
	defaultToolLimit = time.Hour
)
