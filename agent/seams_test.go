package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/tool"
)

// Defect 1: every turn_start has its turn_end, and every tool call in the
// transcript an answer, however the run ends after a model call.
func TestEveryTurnAndCallIsClosed(t *testing.T) {
	tests := []struct {
		name, limits string
		replies      []reply
		want         error
	}{
		{"max_tool_calls", `"max_tool_calls": 1`, []reply{calls(call("1", "add", `{"a":1,"b":2}`), call("2", "add", `{"a":1,"b":2}`))}, ErrBudgetExceeded},
		{"token budget", `"max_total_tokens": 10`, []reply{calls(call("1", "add", `{"a":1,"b":2}`))}, ErrBudgetExceeded},
		{"failed call", `"max_turns": 3`, []reply{{err: &llm.APIError{Kind: llm.KindInvalidRequest, Message: "bad"}}}, ErrModel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAgent(t, `{`+base+`, "tools": ["add"], "limits": {`+tt.limits+`}}`, &recorder{replies: tt.replies})
			starts, ends := 0, 0
			res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
				switch e.Type {
				case event.TurnStart:
					starts++
				case event.TurnEnd:
					ends++
				}
			}))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if starts != ends || starts == 0 {
				t.Errorf("%d turn_start, %d turn_end", starts, ends)
			}
			asked := map[string]bool{}
			for _, m := range res.Messages {
				for _, c := range m.ToolCalls {
					asked[c.ID] = true
				}
				if m.Role == llm.RoleTool {
					delete(asked, m.ToolCallID)
				}
			}
			if len(asked) > 0 {
				t.Errorf("calls without an answer in the transcript: %v", asked)
			}
		})
	}
}

// Defect 2: zero means zero; absent means the default.
func TestZeroRetriesMeanNone(t *testing.T) {
	rate := &llm.APIError{Kind: llm.KindRateLimited, Message: "slow"}
	rec := &recorder{replies: []reply{{err: rate}, answer("late")}}
	a := newTestAgent(t, `{`+base+`, "retry": {"attempts": 0, "output_attempts": 0}}`, rec)
	_, err := a.Run(context.Background(), map[string]any{"who": "x"})
	if !errors.Is(err, ErrModel) || len(rec.reqs) != 1 {
		t.Errorf("attempts 0: err %v after %d calls, want one call", err, len(rec.reqs))
	}
	schema := `"output_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}`
	rec = &recorder{replies: []reply{answer(`{"n": "x"}`), answer(`{"n": 1}`)}}
	a = newTestAgent(t, `{`+base+`, `+schema+`, "retry": {"output_attempts": 0}}`, rec)
	if _, err := a.Run(context.Background(), map[string]any{"who": "x"}); !errors.Is(err, ErrValidation) || len(rec.reqs) != 1 {
		t.Errorf("output_attempts 0: err %v after %d calls, want no correction", err, len(rec.reqs))
	}
	rec = &recorder{replies: []reply{answer(`{"n": "x"}`), answer(`{"n": 1}`)}}
	a = newTestAgent(t, `{`+base+`, `+schema+`}`, rec)
	if _, err := a.Run(context.Background(), map[string]any{"who": "x"}); err != nil || len(rec.reqs) != 2 {
		t.Errorf("default output_attempts: err %v after %d calls, want one correction", err, len(rec.reqs))
	}
}

// Defect 3: a cost budget on an unpriced model is refused; without one the
// cost is unknown (null), not 0.
func TestUnpricedModel(t *testing.T) {
	_, err := New(mustSpec(t, `{`+base+`, "limits": {"max_cost_usd": 1}}`), WithProvider(&recorder{}, "test"))
	if !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), `model "m" has no price`) || !strings.Contains(err.Error(), `"pricing": {`) {
		t.Fatalf("err = %v", err)
	}
	a, err := New(mustSpec(t, `{`+base+`, "limits": {"max_cost_usd": 1}, "pricing": {"m": {"prompt": 1, "completion": 2}}}`),
		WithProvider(&recorder{replies: []reply{answer("hi")}}, "test"))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := a.Run(context.Background(), map[string]any{"who": "x"})
	if res.EstimatedCost == nil || *res.EstimatedCost != (10*1+5*2)/1e6 {
		t.Errorf("priced by the spec: cost %v", res.EstimatedCost)
	}
	res, _ = newTestAgent(t, `{`+base+`}`, &recorder{replies: []reply{answer("hi")}}).Run(context.Background(), map[string]any{"who": "x"})
	b, _ := json.Marshal(res)
	if res.EstimatedCost != nil || !strings.Contains(string(b), `"estimated_cost_usd":null`) {
		t.Errorf("unpriced run reports cost %v", res.EstimatedCost)
	}
}

// A tool middleware counts calls and rewrites arguments; the tool reads
// its run context: the ids, the idempotency key and what remains of the
// budget.
func TestToolMiddlewareAndRunContext(t *testing.T) {
	var counted atomic.Int32
	count := func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, c *tool.Call) (tool.Output, error) {
			counted.Add(1)
			return next(ctx, c)
		}
	}
	double := func(next tool.Handler) tool.Handler {
		return func(ctx context.Context, c *tool.Call) (tool.Output, error) {
			c.Arguments = json.RawMessage(`{"a":20,"b":22}`)
			return next(ctx, c)
		}
	}
	var seen *tool.Call
	spy := tool.Must(tool.Func("spy", "", func(ctx context.Context, in addArgs) (int, error) {
		seen = tool.CallFrom(ctx)
		return in.A + in.B, nil
	}))
	rec := &recorder{replies: []reply{calls(call("c1", "spy", `{"a":1,"b":1}`)), answer("done")}}
	a, err := New(mustSpec(t, `{`+base+`, "tools": ["spy"], "limits": {"max_tool_calls": 5, "max_total_tokens": 1000}}`),
		WithProvider(rec, "test"), WithTools(testTools(t, spy)), WithToolMiddleware(count, double))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithUser("u-7"), WithCorrelationID("corr-1"),
		WithTraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""), WithMetadata(map[string]string{"tenant": "t1"}),
		WithLimits(spec.Limits{MaxToolCalls: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if counted.Load() != 1 || res.Steps[0].Observation != "42" {
		t.Errorf("counted %d, observation %q", counted.Load(), res.Steps[0].Observation)
	}
	want := res.ID + ":1:0"
	if seen == nil || seen.Key() != want || seen.Run.UserID != "u-7" || seen.Run.CorrelationID != "corr-1" ||
		seen.Run.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || seen.Run.Metadata["tenant"] != "t1" || seen.Run.RunID != res.ID {
		t.Fatalf("the tool saw %+v (run %+v), want key %s", seen, seen.Run, want)
	}
	if seen.Budget.ToolCalls != 2 || seen.Budget.Tokens != 1000-15 || seen.Budget.CostUSD != tool.Unlimited || seen.Budget.Deadline.IsZero() {
		t.Errorf("remaining budget %+v", seen.Budget)
	}
}

// A planner from a Go function drives the loop with no model.
func TestPlannerFunc(t *testing.T) {
	p := PlannerFunc(func(_ context.Context, t *Turn) (Decision, error) {
		if t.Number() == 1 {
			return CallTools("add first", llm.ToolCall{ID: "a", Name: "add", Arguments: json.RawMessage(`{"a":2,"b":3}`)}), nil
		}
		return Answer("sum " + t.Results()[0].Observation), nil
	})
	a, err := New(mustSpec(t, `{"agent_name": "det", "version": "v1", "mode": "service", "tools": ["add"]}`), WithTools(testTools(t)), WithPlanner(p))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), nil)
	if err != nil || res.Result != "sum 5" || res.Iterations != 2 || res.ToolsUsed[0] != "add" {
		t.Errorf("result %v after %d turns, %v", res.Result, res.Iterations, err)
	}
}

// The log records are JSON with the run's attributes.
func TestLogRecords(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The secret straddles the log's cap on a thought: cut first, it
	// would no longer look like one.
	thought := "I add them; " + strings.Repeat("x", logCap-23) + " sk-proj-CANARYlog000000000000000008."
	rec := &recorder{replies: []reply{{resp: &llm.Response{Content: thought,
		ToolCalls: []llm.ToolCall{call("1", "add", `{"a":1,"b":2}`)}}}, answer("3")}}
	a, err := New(mustSpec(t, `{`+base+`, "tools": ["add"]}`), WithProvider(rec, "test"), WithTools(testTools(t)), WithLogger(l))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithUser("u-1"), WithCorrelationID("c-1"),
		WithTraceContext("4bf92f3577b34da6a3ce929d0e0e4736", ""))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		if r["run_id"] != res.ID || r["agent"] != "calc" || r["agent_version"] != "v1" || r["user_id"] != "u-1" || r["correlation_id"] != "c-1" ||
			r["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("record lacks the run's attributes: %s", line)
		}
		if r["msg"] == "step" && (!strings.HasPrefix(r["thought"].(string), "I add them") || r["action"] != "add" ||
			r["input"] != `{"a":1,"b":2}` || r["observation"] != "3") {
			t.Errorf("the step's record: %s", line)
		}
		msgs = append(msgs, r["level"].(string)+" "+r["msg"].(string))
	}
	if strings.Contains(buf.String(), "sk-proj-C") {
		t.Error("a secret in a thought reached the logs")
	}
	want := "INFO run start|DEBUG turn start|DEBUG model call|DEBUG tool call|DEBUG step|DEBUG turn start|DEBUG model call|INFO run end"
	if got := strings.Join(msgs, "|"); got != want {
		t.Errorf("records\n%s\nwant\n%s", got, want)
	}
}

// ctxHandler is a slog handler that notes what the caller's context
// carried when each record was handled: how a handler reads trace ids.
type ctxHandler struct {
	slog.Handler
	seen *[]any
}

type traceKey struct{}

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	*h.seen = append(*h.seen, ctx.Value(traceKey{}))
	return nil
}

// Log records are handled with the caller's context, whose values a
// handler may read.
func TestLogRecordsCarryTheCallersContext(t *testing.T) {
	var seen []any
	l := slog.New(ctxHandler{Handler: slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}), seen: &seen})
	rec := &recorder{replies: []reply{calls(call("1", "add", `{"a":1,"b":2}`)), answer("3")}}
	a, err := New(mustSpec(t, `{`+base+`, "tools": ["add"]}`), WithProvider(rec, "test"), WithTools(testTools(t)), WithLogger(l))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.WithValue(context.Background(), traceKey{}, "trace-4bf92f35")
	if _, err := a.Run(ctx, map[string]any{"who": "x"}); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Fatal("no records")
	}
	for i, v := range seen {
		if v != "trace-4bf92f35" {
			t.Errorf("record %d was handled with a context without the caller's value (%v)", i, v)
		}
	}
}

// A tool's panic is logged once, by the run, with its attributes and the
// stack.
func TestToolPanicLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	rec := &recorder{replies: []reply{calls(call("1", "boom", `{"text":"x"}`)), answer("done")}}
	a, err := New(mustSpec(t, `{`+base+`, "tools": ["boom"]}`), WithProvider(rec, "test"), WithTools(testTools(t)), WithLogger(l))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), map[string]any{"who": "x"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var r map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &r) != nil {
		t.Fatalf("records:\n%s", buf.String())
	}
	stack, _ := r["stack"].(string)
	if r["msg"] != "tool boom panicked" || r["run_id"] != res.ID || !strings.Contains(stack, "panic") || !strings.Contains(r["panic"].(string), "kaboom") {
		t.Errorf("record %v", r)
	}
}
