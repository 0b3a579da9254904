package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/tool"
)

// TestDeterministicRuns: with a seed and a fixed clock, two runs of a
// scripted agent, parallel tool calls and a retried model call included,
// give byte-identical Results and event streams; tools see the fixed
// time; the Result says so.
func TestDeterministicRuns(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	var seen []time.Time
	clockTool := tool.Must(tool.Func("when", "Say when.", func(ctx context.Context, in echoArgs) (string, error) {
		c := tool.CallFrom(ctx)
		mu.Lock()
		seen = append(seen, c.Time)
		mu.Unlock()
		return in.Text + " at " + c.Time.Format(time.RFC3339), nil
	}, tool.WithIdempotency(tool.Safe)))
	run := func(opts ...RunOption) ([]byte, []byte) {
		m := scriptModel(t, `{"turns": [
			{"error": {"status": 503, "message": "busy"}},
			{"tool_calls": [{"name": "when", "arguments": {"text": "a"}}, {"name": "when", "arguments": {"text": "b"}},
				{"name": "when", "arguments": {"text": "c"}}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}},
			{"content": "done", "usage": {"prompt_tokens": 20, "completion_tokens": 1}}]}`)
		a := newTestAgent(t, `{"agent_name": "d", "version": "v1", "model_name": "m", "tools": ["when"],
			"retry": {"initial_backoff_ms": 1, "max_backoff_ms": 2}}`, m, clockTool)
		var events bytes.Buffer
		res, err := a.Run(context.Background(), map[string]any{"task": "t"}, append(opts, WithEvents(func(e event.Event) {
			b, _ := json.Marshal(e)
			events.Write(append(b, '\n'))
		}, event.Block()))...)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		return b, events.Bytes()
	}
	r1, e1 := run(WithSeed(7), WithNow(now))
	r2, e2 := run(WithSeed(7), WithNow(now))
	if !bytes.Equal(r1, r2) {
		t.Errorf("two deterministic Results differ:\n%s\n%s", r1, r2)
	}
	if !bytes.Equal(e1, e2) {
		t.Errorf("two deterministic event streams differ:\n%s\n%s", e1, e2)
	}
	var res Result
	json.Unmarshal(r1, &res)
	if res.Seed == nil || *res.Seed != 7 || !res.Deterministic || !res.StartedAt.Equal(now) || res.Metrics.DurationMS != 0 {
		t.Errorf("seed %v deterministic %v started %v duration %v", res.Seed, res.Deterministic, res.StartedAt, res.Metrics.DurationMS)
	}
	for _, s := range seen {
		if !s.Equal(now) {
			t.Errorf("a tool saw %v, not the run's clock", s)
		}
	}
	// Without them, two runs differ (ids and times): the test can fail.
	r3, _ := run()
	r4, _ := run()
	if bytes.Equal(r3, r4) {
		t.Error("two ordinary runs gave the same Result")
	}
}
