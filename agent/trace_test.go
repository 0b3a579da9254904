package agent

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTraceKeepsWhatEachCallDid checks the Result's steps built from the
// run's compact trace: a cut observation keeps the whole output, a failed
// call has an error and no output, an unknown tool is not a tool used,
// and the outputs made from one buffer are apart from each other.
func TestTraceKeepsWhatEachCallDid(t *testing.T) {
	long := strings.Repeat("x", 300)
	m := &recorder{replies: []reply{
		calls(call("c1", "echo", `{"text": "`+long+`"}`), call("c2", "add", `{"a": 1, "b": 2}`)),
		calls(call("c3", "nope", `{}`), call("c4", "add", `{"a": 3, "b": 4}`), call("c5", "boom", `{"text": "x"}`)),
		answer("done"),
	}}
	a := newTestAgent(t, `{`+base+`, "tools": ["add", "echo", "boom"], "limits": {"max_observation_bytes": 100}}`, m)
	start := time.Now()
	res, err := a.Run(context.Background(), map[string]any{"who": "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 5 {
		t.Fatalf("%d steps, want 5", len(res.Steps))
	}
	tests := []struct {
		name    string
		turn    int
		tool    string
		output  string // "" for none
		cut     bool   // the observation is shorter than the output
		failed  bool
		thought string
	}{
		{name: "a cut observation", turn: 1, tool: "echo", output: `"` + long + `"`, cut: true},
		{name: "a parallel call", turn: 1, tool: "add", output: "3"},
		{name: "an unknown tool", turn: 2, tool: "nope", failed: true},
		{name: "a call after a failure", turn: 2, tool: "add", output: "7"},
		{name: "a panic", turn: 2, tool: "boom", failed: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := res.Steps[i]
			if s.Step != i+1 || s.Turn != tt.turn || s.Action == nil || s.Action.Tool != tt.tool || s.Action.CallID != "c"+string(rune('1'+i)) {
				t.Fatalf("step %+v", s)
			}
			if got := string(s.Action.Output); got != tt.output {
				t.Errorf("output %q, want %q", got, tt.output)
			}
			if tt.cut && (len(s.Observation) >= len(tt.output) || !strings.HasPrefix(tt.output, s.Observation[:50])) {
				t.Errorf("observation %q is not the output cut", s.Observation)
			}
			if !tt.cut && !tt.failed && s.Observation != tt.output {
				t.Errorf("observation %q, want the output", s.Observation)
			}
			if tt.failed != (s.Action.Error != "") {
				t.Errorf("error %q", s.Action.Error)
			}
			if s.Timestamp.Before(start.Add(-time.Second)) || s.Timestamp.After(res.FinishedAt.Time) || s.Action.Attempts < 1 && !tt.failed {
				t.Errorf("timestamp %v attempts %d", s.Timestamp, s.Action.Attempts)
			}
		})
	}
	// The outputs share a buffer, so growing one must not write another.
	_ = append(res.Steps[1].Action.Output, '9')
	if string(res.Steps[3].Action.Output) != "7" {
		t.Errorf("appending to one output changed another: %q", res.Steps[3].Action.Output)
	}
	if len(res.ToolsUsed) != 3 || res.ToolsUsed[0] != "echo" || res.ToolsUsed[1] != "add" || res.ToolsUsed[2] != "boom" {
		t.Errorf("tools used %v", res.ToolsUsed)
	}
	if _, ok := res.Metrics.ToolLatencyMS["nope"]; ok || len(res.Metrics.ToolLatencyMS) != 3 {
		t.Errorf("tool latencies %v", res.Metrics.ToolLatencyMS)
	}
	if len(res.ModelCalls) != 3 || res.ModelCalls[0].Model != "m" || res.ModelCalls[2].Turn != 3 {
		t.Errorf("model calls %+v", res.ModelCalls)
	}
}
