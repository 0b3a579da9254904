package eval

import (
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
)

// The figures of a report, from trials made up to the millisecond: the
// tool latencies' percentiles, the tool error rate, an unknown cost, the
// pass rate and pass@k over trials, the comparison's unknown cost delta.
func TestSummarize(t *testing.T) {
	cost := 0.5
	step := func(tool string, ms float64) agent.Step {
		return agent.Step{Action: &agent.Action{Tool: tool, DurationMS: ms}}
	}
	c1, c2 := &Case{Name: "a"}, &Case{Name: "b", Tags: []string{"x"}}
	trials := []trialResult{
		{c: c1, trial: 1, checks: []Check{{Passed: true}}, res: &agent.Result{ID: "r1", Iterations: 2, EstimatedCost: &cost,
			TokenUsage: llm.Usage{TotalTokens: 10}, Metrics: agent.Metrics{ToolCalls: 4, ToolErrors: 1, DurationMS: 100},
			Steps: []agent.Step{step("s", 1), step("s", 2), step("s", 3), step("t", 40)}}},
		{c: c1, trial: 2, checks: []Check{{Passed: false}}, res: &agent.Result{ID: "r2", Iterations: 1, EstimatedCost: &cost,
			Metrics: agent.Metrics{ToolCalls: 2, ToolErrors: 1, DurationMS: 50}, Steps: []agent.Step{step("s", 4), step("s", 100)}}},
		{c: c2, trial: 1, checks: []Check{{Passed: false}}, res: &agent.Result{ID: "r3", Iterations: 3, Metrics: agent.Metrics{DurationMS: 10}}},
		{c: c2, trial: 2, checks: []Check{{Passed: false}}, res: &agent.Result{ID: "r4", Iterations: 2}},
	}
	a := summarize("x@v1", trials)
	if a.Passed != 1 || a.Total != 4 || a.PassRate != 0.25 || a.PassAtK != 0.5 || a.StepsPerTask != 2 {
		t.Errorf("rates %+v", a)
	}
	if a.ToolCalls != 6 || a.ToolErrorRate != 2.0/6 || a.CostUSD != nil || a.DurationMS != 160 || a.TokenUsage != 10 {
		t.Errorf("figures %+v", a)
	}
	// s: 1 2 3 4 100 → p50 the 3rd, p95 the 5th.
	if s := a.ToolLatencyMS["s"]; s != (Latency{P50: 3, P95: 100, Calls: 5}) || a.ToolLatencyMS["t"] != (Latency{P50: 40, P95: 40, Calls: 1}) {
		t.Errorf("latencies %+v", a.ToolLatencyMS)
	}
	if a.Tags["x"] != (TagScore{Passed: 0, Total: 2}) || a.Cases[0].CostUSD == nil || a.Cases[2].CostUSD != nil {
		t.Errorf("tags %+v, cases %+v", a.Tags, a.Cases)
	}
	priced := summarize("y@v1", trials[:2])
	if c := CompareAgents(&priced, &a); c.CostDelta != nil || len(c.Unmatched) != 2 {
		t.Errorf("comparison %+v", c)
	}
}
