package agent

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

// RunLog is a stored run as its log tells it: what trace prints.
type RunLog struct {
	Run       store.Run
	SessionID string
	Input     map[string]any
	// Model is the model the run was given instead of its spec's, if any.
	Model      string
	StartedAt  Timestamp
	ModelCalls []LoggedModelCall
	ToolCalls  []LoggedToolCall
	// Result is the run's Result as JSON, exactly as stored; nil when the
	// run has not ended.
	Result json.RawMessage
	// Resumes are the turns at which the run was resumed.
	Resumes []int
	Events  []event.Event
}

// LoggedModelCall is a model call of a stored run.
type LoggedModelCall struct {
	Turn       int
	Agent      string
	Response   *llm.Response // nil when the call failed
	Error      string
	Attempts   int
	DurationMS float64
}

// LoggedToolCall is a tool call of a stored run: its result, or only its
// intent when the run stopped while it was in flight.
type LoggedToolCall struct {
	Turn      int
	Key       string
	CallID    string
	Tool      string
	Arguments json.RawMessage
	// Output is the tool's result, Error its failure; both are empty
	// when Pending.
	Output     json.RawMessage
	Error      *tool.ErrorDetails
	DurationMS float64
	// Pending is a non-idempotent call whose intent is on record but not
	// its result.
	Pending bool
}

// ReadRunLog reads the log of the stored run runID.
func ReadRunLog(ctx context.Context, st store.Store, runID string) (*RunLog, error) {
	l, err := readLog(ctx, st, runID)
	if err != nil {
		return nil, err
	}
	out := &RunLog{Run: l.run, SessionID: l.start.SessionID, Input: l.start.Input, Model: l.start.Model,
		StartedAt: l.start.StartedAt, Result: l.result, Resumes: l.resumes}
	for i := range l.calls {
		c := &l.calls[i]
		mc := LoggedModelCall{Turn: l.callTurns[i], Agent: c.Agent, Attempts: c.Attempts, DurationMS: c.DurationMS}
		if c.Response != nil {
			mc.Response = c.Response.llm()
		}
		if c.Error != nil {
			mc.Error = c.Error.Message
		}
		out.ModelCalls = append(out.ModelCalls, mc)
	}
	for key, in := range l.intents {
		if _, done := l.results[key]; !done {
			out.ToolCalls = append(out.ToolCalls, LoggedToolCall{Turn: l.turns[key], Key: key, CallID: in.CallID, Tool: in.Tool,
				Arguments: json.RawMessage(in.Arguments), Pending: true})
		}
	}
	for key, res := range l.results {
		tc := LoggedToolCall{Turn: l.turns[key], Key: key, CallID: res.CallID, Tool: res.Tool, Arguments: json.RawMessage(res.Arguments),
			Error: res.Error, DurationMS: res.DurationMS}
		if res.Output != nil {
			tc.Output = json.RawMessage(*res.Output)
		}
		out.ToolCalls = append(out.ToolCalls, tc)
	}
	sort.Slice(out.ToolCalls, func(i, j int) bool { return l.order[out.ToolCalls[i].Key] < l.order[out.ToolCalls[j].Key] })
	if out.Events, err = l.Events(); err != nil {
		return nil, err
	}
	return out, nil
}
