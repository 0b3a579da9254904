package eval

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentry/agentry/agent"
)

// Each assertion type, on a Result it passes and one it fails.
func TestAssertions(t *testing.T) {
	cost := 0.02
	res := &agent.Result{Result: map[string]any{"queue": "billing", "note": "refund of order A1"}, Outcome: agent.OutcomeSuccess,
		TerminateReason: agent.ReasonCompleted, Iterations: 2, EstimatedCost: &cost, Metrics: agent.Metrics{DurationMS: 120},
		Steps: []agent.Step{{Action: &agent.Action{Tool: "lookup_order", Input: json.RawMessage(`{"order": "A1", "deep": true}`)}}}}
	text := &agent.Result{Result: "The ticket goes to billing."}
	c := &Case{Name: "c", Input: map[string]any{"ticket": "money"}, Expected: json.RawMessage(`{"queue": "billing"}`)}
	for _, tc := range []struct {
		name   string
		a      string
		res    *agent.Result
		passed bool
		reason string
	}{
		{"equals_subset", `{"type": "equals_subset"}`, res, true, ""},
		{"equals, whole", `{"type": "equals"}`, res, false, "does not match"},
		{"equals, a field", `{"type": "equals", "field": "queue"}`, res, true, ""},
		{"equals, a value", `{"type": "equals", "field": "queue", "value": "tech"}`, res, false, `"billing" does not match "tech"`},
		{"contains", `{"type": "contains", "value": "billing"}`, text, true, ""},
		{"contains, JSON", `{"type": "contains", "value": "order A1"}`, res, true, ""},
		{"not_contains", `{"type": "not_contains", "value": "billing"}`, text, false, `contains "billing"`},
		{"regex", `{"type": "regex", "value": "^The .* billing\\.$"}`, text, true, ""},
		{"regex, no match", `{"type": "regex", "value": "^tech"}`, text, false, "does not match /^tech/"},
		{"json_schema", `{"type": "json_schema", "value": {"type": "object", "required": ["queue"]}}`, res, true, ""},
		{"json_schema, invalid", `{"type": "json_schema", "value": {"type": "object", "required": ["priority"]}}`, res, false, "priority"},
		{"enum", `{"type": "enum", "field": "queue", "value": ["billing", "tech"]}`, res, true, ""},
		{"enum, not allowed", `{"type": "enum", "field": "queue", "value": ["tech"]}`, res, false, `"billing" is not one of ["tech"]`},
		{"a missing field", `{"type": "enum", "field": "priority", "value": ["high"]}`, res, false, `no field "priority"`},
		{"tool_called, args subset", `{"type": "tool_called", "tool": "lookup_order", "args": {"order": "A1"}}`, res, true, ""},
		{"tool_called, other args", `{"type": "tool_called", "tool": "lookup_order", "args": {"order": "B2"}}`, res, false, `was not called with arguments {"order":"B2"}`},
		{"tool_not_called", `{"type": "tool_not_called", "tool": "refund"}`, res, true, ""},
		{"tool_not_called, called", `{"type": "tool_not_called", "tool": "lookup_order"}`, res, false, "was called (1 times)"},
		{"outcome", `{"type": "outcome", "value": "success"}`, res, true, ""},
		{"terminate_reason", `{"type": "terminate_reason", "value": "max_turns"}`, res, false, "is completed, not max_turns"},
		{"max_steps", `{"type": "max_steps", "value": 2}`, res, true, ""},
		{"max_steps, over", `{"type": "max_steps", "value": 1}`, res, false, "steps 2 is over 1"},
		{"max_cost_usd, over", `{"type": "max_cost_usd", "value": 0.01}`, res, false, "cost_usd 0.02 is over 0.01"},
		{"max_cost_usd, unknown", `{"type": "max_cost_usd", "value": 0.01}`, text, false, "the cost is unknown"},
		{"max_latency_ms", `{"type": "max_latency_ms", "value": 100}`, res, false, "latency_ms 120 is over 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Assertion
			if err := json.Unmarshal([]byte(tc.a), &a); err != nil {
				t.Fatal(err)
			}
			if probs := a.check("a"); len(probs) > 0 {
				t.Fatal(probs)
			}
			got := checkOne(context.Background(), a, c, tc.res, nil, nil)
			if got.Passed != tc.passed || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("passed %v, %q; want %v, %q", got.Passed, got.Reason, tc.passed, tc.reason)
			}
		})
	}
}

// A judge scores; its verdict is kept, and the same output is not judged
// twice.
func TestJudge(t *testing.T) {
	calls := 0
	judge := func(_ context.Context, ref, judged string, in map[string]any) (float64, string, string, error) {
		calls++
		if ref != "judge@v1" || judged != "run_x" || in["rubric"] != "Polite" || in["output"] != "Thank you, it is refunded." || !strings.Contains(in["input"].(string), "money") {
			t.Errorf("the judge got %s %v", ref, in)
		}
		return 0.8, "polite enough", "run_j", nil
	}
	a := Assertion{Type: "judge", Agent: "judge@v1", Rubric: "Polite"}
	c := &Case{Name: "c", Input: map[string]any{"ticket": "money"}}
	res := &agent.Result{ID: "run_x", Result: "Thank you, it is refunded."}
	known := &verdicts{}
	got := checkOne(context.Background(), a, c, res, judge, known)
	if !got.Passed || *got.Score != 0.8 || got.Reason != "polite enough" || got.JudgeRun != "run_j" {
		t.Errorf("%+v", got)
	}
	high := 0.9
	a.MinScore = &high
	if got := checkOne(context.Background(), a, c, res, judge, known); got.Passed || calls != 1 {
		t.Errorf("with min_score 0.9: %+v, %d calls", got, calls)
	}
	if got := checkOne(context.Background(), a, c, res, nil, &verdicts{}); got.Passed || !strings.Contains(got.Reason, "no judge") {
		t.Errorf("without a judge: %+v", got)
	}
}
