package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/internal/ids"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// StageRun is a stage's agent run a pipeline hands out (Drive): the
// agent, its input and the run's place in the pipeline. The executor
// runs it as a run of its own (parent ParentRunID, id RunID) and gives
// its Result back with Continue.
type StageRun struct {
	Stage string `json:"stage"`
	Hop   int    `json:"hop"`
	// RunID is the id the stage's run is to have; ParentRunID the
	// pipeline's run.
	RunID       string `json:"run_id"`
	ParentRunID string `json:"parent_run_id"`
	// Agent is the stage's agent (NAME@VERSION) in AgentsDir, or, for an
	// inline spec, Spec with the directory its paths start from.
	Agent     string          `json:"agent,omitempty"`
	AgentsDir string          `json:"agents_dir,omitempty"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	BaseDir   string          `json:"base_dir,omitempty"`
	Input     map[string]any  `json:"input"`
	// Seed is the stage run's seed, in a seeded pipeline run.
	Seed *int64 `json:"seed,omitempty"`
}

// DispatchError is the error of a pipeline run that stopped to have a
// stage's agent run elsewhere (Drive). It matches drive.ErrDispatched.
type DispatchError struct {
	Stage StageRun
	// State is the run so far, for Continue: opaque.
	State json.RawMessage
}

func (e *DispatchError) Error() string {
	return fmt.Sprintf("%s: stage %s (run %s)", drive.ErrDispatched, e.Stage.Stage, e.Stage.RunID)
}

// Is makes errors.Is(err, drive.ErrDispatched) true.
func (e *DispatchError) Is(target error) bool { return target == drive.ErrDispatched }

// Drive makes the run driven by an outside engine (package temporal), as
// p says: with Dispatch, it hands each agent stage's run out instead of
// running it (the run stops before the stage with a *DispatchError, and
// Continue goes on with the stage's Result); Driver names the driver,
// something that moves between processes (a workflow), under whose name
// the run's lease is held between its steps; RunID is the run's id (as
// WithRunID), created when it is not stored yet. A dispatched run needs
// a store and a run id, and a pipeline with hooks or mocks (which run in
// its process) cannot be dispatched. The plan's other fields (Results,
// RanThrough, Deadline) are an agent run's, each stage's run being driven
// on its own: a pipeline given one refuses to run, rather than drop it.
func Drive(p drive.Plan) RunOption {
	return func(c *runConfig) {
		if p.Results != nil || p.RanThrough != nil || !p.Deadline.IsZero() {
			c.badPlan = true
		}
		c.dispatch = c.dispatch || p.Dispatch
		if p.Driver != "" {
			c.driver = p.Driver
		}
		if p.RunID != "" {
			c.runID = p.RunID
		}
	}
}

// Continue goes on with a dispatched run (Drive) from state, where it
// stopped, stage being the Result of the stage's run it handed out.
func Continue(state json.RawMessage, stage *agent.Result) RunOption {
	return func(c *runConfig) { c.cont = &continuation{state: state, stage: stage} }
}

type continuation struct {
	state json.RawMessage
	stage *agent.Result
}

// runSnapshot is a dispatched run's state between its steps.
type runSnapshot struct {
	Result   *Result        `json:"result"`
	Last     map[string]any `json:"last,omitempty"`
	Confs    []float64      `json:"confs,omitempty"`
	Unpriced bool           `json:"unpriced,omitempty"`
	Start    time.Time      `json:"start"`
	// Stage is the stage handed out, begun: its hop, its start.
	Stage *StageRecord `json:"stage,omitempty"`
}

// checkDispatch refuses what a dispatched run cannot do.
func (p *Pipeline) checkDispatch(c *runConfig) error {
	if c.badPlan {
		return fmt.Errorf("%w: Drive: Results, RanThrough and Deadline drive an agent's run, not a pipeline's (give them to the stage's session)", ErrInvalid)
	}
	if !c.dispatch && c.cont == nil {
		return nil
	}
	if c.store == nil || c.runID == "" || c.driver == "" {
		return fmt.Errorf("%w: a dispatched pipeline run needs a store, a run id and a driver (WithStore, and Drive with a RunID and a Driver)", ErrInvalid)
	}
	if p.mock {
		return fmt.Errorf("%w: a pipeline with mocks runs them in its process: it is not dispatched", ErrInvalid)
	}
	for _, st := range p.stages {
		if h := st.hooks; h.PreProcess != nil || h.PostProcess != nil || h.Work != nil {
			return fmt.Errorf("%w: stage %s has hooks, which run in the pipeline's process: it is not dispatched", ErrInvalid, st.def.Name)
		}
	}
	return nil
}

// restore takes up a dispatched run where it stopped.
func (r *runState) restore(c *continuation) (*Envelope, error) {
	var snap runSnapshot
	if err := json.Unmarshal(c.state, &snap); err != nil || snap.Result == nil || snap.Result.Envelope == nil {
		return nil, fmt.Errorf("%w: Continue: the state of a dispatched run: %v", ErrInvalid, err)
	}
	if c.stage == nil {
		return nil, fmt.Errorf("%w: Continue: the stage's Result is missing", ErrInvalid)
	}
	r.res, r.last, r.confs, r.unpriced, r.start, r.started = snap.Result, snap.Last, snap.Confs, snap.Unpriced, snap.Start, snap.Stage
	if r.res.Metrics.ToolLatencyMS == nil {
		r.res.Metrics.ToolLatencyMS = map[string]float64{}
	}
	if r.res.Steps == nil {
		r.res.Steps = []agent.Step{}
	}
	if r.res.ToolsUsed == nil {
		r.res.ToolsUsed = []string{}
	}
	if r.res.ModelCalls == nil {
		r.res.ModelCalls = []agent.ModelCall{}
	}
	if r.res.Messages == nil {
		r.res.Messages = []llm.Message{}
	}
	r.given = c.stage
	return r.res.Envelope, nil
}

// handsOut reports whether the stage's work is an agent's run the
// pipeline hands out: not a plan stage without its plan, which fails
// here without running.
func (r *runState) handsOut(st *stage) bool {
	if !r.dispatch || r.given != nil || st.agent.Mode() == spec.ModeService {
		return false
	}
	if st.agent.Mode() == spec.ModePlan {
		if _, ok := r.env.Outputs[st.def.PlanKey]["steps"].([]any); !ok {
			return false
		}
	}
	return true
}

// yield stops the run before st to have its agent run elsewhere: what
// is queued is written, the lease kept for the driver.
func (r *runState) yield(ctx context.Context, st *stage, rec StageRecord) error {
	env := r.env
	run := StageRun{Stage: st.def.Name, Hop: env.HopCount, RunID: ids.New("run"), ParentRunID: r.runID,
		Input: r.stageInput(st, false)}
	if ref, inline := st.def.agentRef(); !inline {
		run.Agent, run.AgentsDir = ref, r.p.agentsDir
	} else {
		run.Spec, run.BaseDir = st.def.Agent, r.p.baseDir
	}
	if r.set.Seed != nil {
		seed := *r.set.Seed + int64(run.Hop)
		run.Seed = &seed
	}
	state, err := json.Marshal(runSnapshot{Result: r.res, Last: r.last, Confs: r.confs, Unpriced: r.unpriced, Start: r.start, Stage: &rec})
	if err != nil {
		return err
	}
	r.endSpan(&r.res.Result) // this step's span; the next step starts its own
	r.bus.Flush()
	if w := r.store; w != nil {
		if r.unsub != nil {
			r.unsub()
		}
		if err := w.Hold(context.WithoutCancel(ctx), store.Running, drive.Hold); err != nil {
			return err
		}
	}
	return &DispatchError{Stage: run, State: state}
}

// stageInput is what a stage's agent is given: the raw input, the
// outputs so far by output key, the plan for a plan stage, and the
// user's answer when resuming (taken from the envelope when consume).
func (r *runState) stageInput(st *stage, consume bool) map[string]any {
	input := maps.Clone(r.env.RawInput)
	if input == nil {
		input = map[string]any{}
	}
	for k, v := range r.env.Outputs {
		input[k] = v
	}
	if st.agent.Mode() == spec.ModePlan {
		input["plan"] = r.env.Outputs[st.def.PlanKey] // where the plan planner reads it
	}
	if ans, ok := r.env.Metadata["user_response"]; ok {
		input["user_response"] = ans
		if consume {
			delete(r.env.Metadata, "user_response")
		}
	}
	return input
}
