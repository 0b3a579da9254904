package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// Planner decides each turn of a run: the plan step of plan → act →
// observe. Next looks at the run through t (its transcript, input and the
// results of the last tool calls), usually calls the model with
// t.Generate, and returns what to do. Every mode is a Planner; a host may
// bring its own with WithPlanner.
type Planner interface {
	Next(ctx context.Context, t *Turn) (Decision, error)
}

// PlannerFunc makes a function a Planner: deterministic planning for hosts
// and tests, with no model at all.
type PlannerFunc func(ctx context.Context, t *Turn) (Decision, error)

// Next calls f.
func (f PlannerFunc) Next(ctx context.Context, t *Turn) (Decision, error) { return f(ctx, t) }

// Observer is implemented by planners that show tool results to the model
// their own way (ReAct writes "Observation:" lines); for other planners
// each result becomes a tool message answering its call.
type Observer interface {
	Observe(t *Turn, results []ToolResult)
}

// Decision is what a planner decided for one turn: a final answer, tool
// calls to run, or a message to the model that continues the run. A
// zero Decision continues the run as it is.
type Decision struct {
	// Final ends the run with this answer.
	Final *Final
	// Calls are the tool calls to run this turn, in parallel unless
	// Sequential; Thought is the reasoning that goes with them.
	Calls      []llm.ToolCall
	Thought    string
	Sequential bool
	// Message is added to the transcript (a correction, an observation).
	Message *llm.Message
}

// Final is a final answer.
type Final struct {
	// Text is the answer as text (the result's raw_content).
	Text string
	// Output is the structured answer, when there is one: a decoded JSON
	// value (an object; in ReAct's Final Answer, any JSON value). The
	// result's "result" is Output when set, else Text.
	Output any
	// Err, when set, makes the answer final but the run unsuccessful (an
	// answer that never matched the output schema: ErrValidation).
	Err error
}

// Answer returns a final answer of text.
func Answer(text string) Decision { return Decision{Final: &Final{Text: text}} }

// CallTools returns a decision to run calls.
func CallTools(thought string, calls ...llm.ToolCall) Decision {
	return Decision{Calls: calls, Thought: thought}
}

// ToolResult is a finished tool call, as planners see it.
type ToolResult struct {
	Call llm.ToolCall
	// Output is the tool's result; Observation what the model is shown
	// (a cut result, or an error as a StandardToolResult).
	Output      json.RawMessage
	Observation string
	Err         error
	Hints       *tool.Hints
	Cached      bool
	Attempts    int
	Duration    time.Duration
	at          time.Duration // the call's start, since the run's
	attachments map[string]string
	after       string // what the call waited for, and why (schedule)
}

// Turn is a planner's view of the run at one turn. It is valid during the
// call to Next and Observe only.
type Turn struct{ r *run }

// Number is the turn, from 1.
func (t *Turn) Number() int { return t.r.st.Turn }

// Input is the run's input. It must not be changed.
func (t *Turn) Input() map[string]any { return t.r.st.Input }

// Messages is the transcript so far. It must not be changed.
func (t *Turn) Messages() []llm.Message { return t.r.st.Messages }

// Results are the results of the previous turn's tool calls, in the order
// they were asked for.
func (t *Turn) Results() []ToolResult { return t.r.results }

// Agent is the agent whose turn it is (a handoff changes it).
func (t *Turn) Agent() *Agent { return t.r.a }

// Generate calls the agent's model with the transcript, through the
// provider chain, and streams text to subscribers. The reply is added to
// the transcript and its usage and cost to the run.
func (t *Turn) Generate(ctx context.Context) (*llm.Response, error) {
	resp, err := t.r.callModel(ctx)
	if err != nil {
		return nil, err
	}
	t.r.st.Messages = append(t.r.st.Messages, resp.Message())
	t.r.st.LastContent = resp.Content
	return resp, nil
}

// Answer turns text into a decision: a final answer when the agent has no
// output schema or text matches it; otherwise a correction for the model
// while retry.output_attempts last, then a final answer that fails with
// ErrValidation.
func (t *Turn) Answer(text string) Decision { return t.r.answer(text) }

// WorkFunc does the work of a service-mode agent: Go code, no model.
type WorkFunc func(ctx context.Context, input map[string]any) (map[string]any, error)

// mode is what a mode brings: how its first messages are composed and
// its planner.
type mode struct {
	messages func(a *Agent, input map[string]any) ([]llm.Message, []string)
	planner  func(a *Agent, o options) Planner
}

// modes is the one table from a mode name to its planner.
var modes = map[spec.Mode]mode{
	spec.ModeTools:     {toolsMessages, func(*Agent, options) Planner { return toolsPlanner{} }},
	spec.ModeReAct:     {reactMessages, func(*Agent, options) Planner { return reactPlanner{} }},
	spec.ModeChooser:   {composedMessages, func(*Agent, options) Planner { return structuredPlanner{} }},
	spec.ModeWriter:    {composedMessages, func(*Agent, options) Planner { return structuredPlanner{} }},
	spec.ModeExtractor: {composedMessages, func(*Agent, options) Planner { return structuredPlanner{} }},
	spec.ModePlan:      {toolsMessages, func(*Agent, options) Planner { return planPlanner{key: "plan"} }},
	spec.ModeService:   {toolsMessages, func(_ *Agent, o options) Planner { return serviceRunner{o.service} }},
}

func (a *Agent) choosePlanner(o options) error {
	m, ok := modes[a.spec.Mode]
	if !ok {
		return fmt.Errorf("mode %q has no planner", a.spec.Mode)
	}
	a.planner = m.planner(a, o)
	if o.planner != nil {
		a.planner = o.planner
	}
	if o.reflector != nil {
		a.planner = withReflector(a.planner, o.reflector)
	}
	return nil
}

// toolsPlanner is native function calling: the model answers or asks for
// tool calls.
type toolsPlanner struct{}

func (toolsPlanner) Next(ctx context.Context, t *Turn) (Decision, error) {
	resp, err := t.Generate(ctx)
	if err != nil {
		return Decision{}, err
	}
	if len(resp.ToolCalls) > 0 {
		return CallTools(resp.Content, resp.ToolCalls...), nil
	}
	return t.Answer(resp.Content), nil
}

// structuredPlanner is the chooser, writer and extractor modes: one call
// with the output schema, validated, with corrections.
type structuredPlanner struct{}

func (structuredPlanner) Next(ctx context.Context, t *Turn) (Decision, error) {
	resp, err := t.Generate(ctx)
	if err != nil {
		return Decision{}, err
	}
	return t.Answer(resp.Content), nil
}

// serviceRunner runs the agent's Go service function once.
type serviceRunner struct{ fn WorkFunc }

func (s serviceRunner) Next(ctx context.Context, t *Turn) (Decision, error) {
	if s.fn == nil {
		return Decision{}, fmt.Errorf("%w: mode service needs a Go function to do its work (agent.WithWork, or a pipeline stage's Work hook)", ErrConfig)
	}
	out, err := s.fn(ctx, t.Input())
	if err != nil {
		return Decision{}, fmt.Errorf("%w: service: %w", ErrTool, err)
	}
	if out == nil {
		out = map[string]any{}
	}
	b, _ := json.Marshal(out)
	return Decision{Final: &Final{Text: string(b), Output: out}}, nil
}
