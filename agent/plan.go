package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// planPlanner is the jeeves tool plan: the input's plan ({"steps":
// [{"tool": NAME, "parameters": {...}}]}) runs step by step in one turn,
// each step a tool call of the agent's tools; the output lists each
// step's StandardToolResult with its timing.
type planPlanner struct{ key string }

func (p planPlanner) Next(_ context.Context, t *Turn) (Decision, error) {
	if t.Number() > 1 {
		return p.report(t), nil
	}
	plan, _ := t.Input()[p.key].(map[string]any)
	steps, ok := plan["steps"].([]any)
	if !ok {
		return Decision{}, fmt.Errorf("%w: no plan: the input needs %q with a list of steps", ErrConfig, p.key)
	}
	if len(steps) == 0 {
		return p.report(t), nil
	}
	calls := make([]llm.ToolCall, len(steps))
	for i, raw := range steps {
		step, _ := raw.(map[string]any)
		name, _ := step["tool"].(string)
		params := step["parameters"]
		if params == nil {
			params = map[string]any{}
		}
		args, err := json.Marshal(params)
		if err != nil {
			return Decision{}, fmt.Errorf("%w: plan step %d: parameters: %v", ErrConfig, i+1, err)
		}
		calls[i] = llm.ToolCall{ID: fmt.Sprintf("step_%d", i+1), Name: name, Arguments: args}
	}
	return Decision{Calls: calls, Sequential: true}, nil
}

// Observe keeps the transcript quiet: a plan has no model to show results to.
func (planPlanner) Observe(*Turn, []ToolResult) {}

// report is the final answer: each step's result, and counts.
func (planPlanner) report(t *Turn) Decision {
	results := []any{}
	succeeded, failed := 0, 0
	for i, res := range t.Results() {
		entry := map[string]any{"step": i + 1, "tool": res.Call.Name, "duration_ms": ms(res.Duration)}
		var tr *tool.Result
		if res.Err != nil {
			tr = tool.Failure(toolErrorDetails(res.Err), "")
		} else if n, err := tool.Normalize(res.Output); err != nil {
			tr = tool.Failure(tool.DetailsFrom(err, false), "")
		} else {
			tr = n
		}
		entry["status"] = string(tr.Status)
		if tr.Data != nil {
			entry["data"] = tr.Data
		}
		if tr.Error != nil {
			entry["error"] = tr.Error
			failed++
		} else {
			succeeded++
		}
		results = append(results, entry)
	}
	outcome := OutcomeSuccess
	if failed > 0 {
		outcome = OutcomePartial
	}
	out := map[string]any{"results": results, "succeeded": succeeded, "failed": failed, "outcome": string(outcome)}
	b, _ := json.Marshal(out)
	return Decision{Final: &Final{Text: string(b), Output: out}}
}
