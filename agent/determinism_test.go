package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
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

// TestSeededIDs: a seeded run's ids come from its seed, agent, input and
// parent, so one store keeps seeded runs of two agents, of two inputs and
// of one agent under two parents; the same run given the same seed has
// the same id. A spec's seed seeds randomness, not ids: its agent runs
// again and again on one store.
func TestSeededIDs(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, testdb.SQLite(t))
	run := func(spec string, input map[string]any, opts ...RunOption) (string, error) {
		a := newTestAgent(t, spec, &recorder{replies: []reply{answer("ok")}})
		res, err := a.Run(ctx, input, append(opts, WithStore(st))...)
		if res == nil {
			return "", err
		}
		return res.ID, err
	}
	const one, two = `{"agent_name": "one", "version": "v1", "model_name": "m"}`, `{"agent_name": "two", "version": "v1", "model_name": "m"}`
	task := map[string]any{"task": "t"}
	seen := map[string]string{}
	for _, tt := range []struct {
		name  string
		spec  string
		input map[string]any
		opts  []RunOption
	}{
		{"agent one", one, task, []RunOption{WithSeed(7)}},
		{"agent two, same seed", two, task, []RunOption{WithSeed(7)}},
		{"another input", one, map[string]any{"task": "u"}, []RunOption{WithSeed(7)}},
		{"under a parent", one, task, []RunOption{WithSeed(7), WithParentRunID("run_p")}},
		{"a spec's seed", `{"agent_name": "s", "version": "v1", "model_name": "m", "seed": 7}`, task, nil},
		{"a spec's seed again", `{"agent_name": "s", "version": "v1", "model_name": "m", "seed": 7}`, task, nil},
	} {
		id, err := run(tt.spec, tt.input, tt.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if prev, ok := seen[id]; ok {
			t.Errorf("%s has the id of %s", tt.name, prev)
		}
		seen[id] = tt.name
	}
	// The same run, seed and store: the same id, which the store holds.
	a := newTestAgent(t, one, &recorder{replies: []reply{answer("ok")}})
	s, err := a.NewSession(task, WithSeed(7))
	if err != nil {
		t.Fatal(err)
	}
	if seen[s.State().RunID] != "agent one" {
		t.Errorf("the same seeded run has another id: %s", s.State().RunID)
	}
}

// TestDeterministicSubAgents: a deterministic run's sub-agents take its
// seed and clock: two runs with a sub-agent give byte-identical event
// streams, the sub-run's ids and times included.
func TestDeterministicSubAgents(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := func(opts ...RunOption) []byte {
		reg := NewRegistry()
		sub := newTestAgent(t, `{"agent_name": "helper", "version": "v1", "model_name": "m", "description": "Helps."}`,
			&recorder{replies: []reply{answer("helped"), answer("helped")}})
		if err := reg.Register(sub); err != nil {
			t.Fatal(err)
		}
		// The same sub-agent twice with one input: two runs, two ids.
		m := &recorder{replies: []reply{calls(call("1", "helper", `{"task": "help"}`), call("2", "helper", `{"task": "help"}`)), answer("done")}}
		a, err := New(mustSpec(t, `{"agent_name": "boss", "version": "v1", "model_name": "m", "tools": ["agent:helper"]}`),
			WithProvider(m, "test"), WithRegistry(reg))
		if err != nil {
			t.Fatal(err)
		}
		var events bytes.Buffer
		subRuns := map[string]bool{}
		_, err = a.Run(context.Background(), map[string]any{"task": "t"}, append(opts, WithEvents(func(e event.Event) {
			if e.AgentName == "helper" {
				subRuns[e.RunID] = true
			}
			b, _ := json.Marshal(e)
			events.Write(append(b, '\n'))
		}, event.Block()))...)
		if err != nil || len(subRuns) != 2 {
			t.Fatalf("%v; the sub-agent's runs: %v", err, subRuns)
		}
		return events.Bytes()
	}
	e1, e2 := run(WithSeed(3), WithNow(now)), run(WithSeed(3), WithNow(now))
	if !bytes.Equal(e1, e2) {
		t.Errorf("two deterministic event streams differ:\n%s\n%s", e1, e2)
	}
}

// TestDeterministicRefusal: the Result of a run its input kept from
// starting follows the run's options too: seeded ids, the fixed clock,
// the trace id.
func TestDeterministicRefusal(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := newTestAgent(t, `{"agent_name": "d", "version": "v1", "model_name": "m", "input_keys": ["who"]}`, &recorder{})
	run := func() []byte {
		res, err := a.Run(context.Background(), map[string]any{}, WithSeed(4), WithNow(now), WithTraceContext(trace, ""))
		if !errors.Is(err, ErrInvalidInput) || res == nil {
			t.Fatalf("%v, %v", res, err)
		}
		if res.TraceID != trace || !res.StartedAt.Equal(now) || !res.Deterministic {
			t.Errorf("trace %q started %v deterministic %v", res.TraceID, res.StartedAt, res.Deterministic)
		}
		b, _ := json.Marshal(res)
		return b
	}
	if r1, r2 := run(), run(); !bytes.Equal(r1, r2) {
		t.Errorf("two refusals differ:\n%s\n%s", r1, r2)
	}
}
