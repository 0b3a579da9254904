package agent

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/testdb"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
	"github.com/agentry/agentry/tool"
)

const base = `"agent_name": "calc", "version": "v1", "model_name": "m", "system_text": "You add for ${who}.", "input_keys": ["who"]`

func TestToolsLoop(t *testing.T) {
	m := &recorder{replies: []reply{
		calls(call("c1", "add", `{"a": 1, "b": 2}`)),
		calls(call("c2", "echo", `{"text": "three"}`), call("c3", "add", `{"a": 3, "b": 4}`)),
		answer("1+2 is 3; 3+4 is 7."),
	}}
	a := newTestAgent(t, `{`+base+`, "tools": ["add", "echo"]}`, m)
	res, err := a.Run(context.Background(), map[string]any{"who": "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || res.Outcome != OutcomeSuccess || res.TerminateReason != ReasonCompleted || res.Result != "1+2 is 3; 3+4 is 7." {
		t.Errorf("result %+v", res)
	}
	if res.Iterations != 3 || len(res.Steps) != 3 || !slices.Equal(res.ToolsUsed, []string{"add", "echo"}) {
		t.Errorf("iterations %d steps %d tools %v", res.Iterations, len(res.Steps), res.ToolsUsed)
	}
	wantObs := []string{"3", `"three"`, "7"}
	for i, s := range res.Steps {
		if s.Step != i+1 || s.Observation != wantObs[i] || string(s.Action.Output) != wantObs[i] || s.Timestamp.IsZero() {
			t.Errorf("step %d = %+v", i, s)
		}
	}
	roles := []llm.Role{}
	for _, msg := range res.Messages {
		roles = append(roles, msg.Role)
	}
	want := []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleAssistant, llm.RoleTool, llm.RoleTool, llm.RoleAssistant}
	if !slices.Equal(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
	if res.Messages[0].Content != "You add for Ada." || res.Messages[1].Content != `who = "Ada"` {
		t.Errorf("prompt %q / %q", res.Messages[0].Content, res.Messages[1].Content)
	}
	if res.Messages[5].ToolCallID != "c2" || res.Messages[6].ToolCallID != "c3" {
		t.Error("tool results are not in the order of the calls")
	}
	if res.TokenUsage.TotalTokens != 45 || len(res.ModelCalls) != 3 || res.ModelCalls[2].Attempts != 1 {
		t.Errorf("usage %+v calls %+v", res.TokenUsage, res.ModelCalls)
	}
	if len(m.reqs) != 3 || len(m.reqs[0].Tools) != 2 || len(m.reqs[1].Messages) != 4 || len(m.reqs[2].Messages) != 7 {
		t.Errorf("requests: %d, tools %d", len(m.reqs), len(m.reqs[0].Tools))
	}
	if res.Confidence <= 0.5 || !strings.Contains(res.Decision, "Called add, echo, add over 3 turns") {
		t.Errorf("confidence %v decision %q", res.Confidence, res.Decision)
	}
}

func TestParallelToolsAreConcurrent(t *testing.T) {
	// Each tool waits until the other has started: run one after the
	// other, the first would wait until its timeout and fail.
	var wg sync.WaitGroup
	wg.Add(2)
	meet := func(name string) tool.Tool {
		return tool.Must(tool.Func(name, "", func(ctx context.Context, _ echoArgs) (string, error) {
			wg.Done()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
				return name + " met", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}))
	}
	m := &recorder{replies: []reply{calls(call("l", "left", `{"text":""}`), call("r", "right", `{"text":""}`)), answer("met")}}
	a := newTestAgent(t, `{`+base+`, "tools": ["left", "right"], "limits": {"tool_timeout_ms": 10000}}`, m, meet("left"), meet("right"))
	res, err := a.Run(context.Background(), map[string]any{"who": "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Steps {
		if s.Action.Error != "" {
			t.Errorf("%s failed: %s", s.Action.Tool, s.Action.Error)
		}
	}
}

func TestMaxParallelTools(t *testing.T) {
	var cur, peak atomic.Int32
	probe := tool.Must(tool.Func("probe", "", func(context.Context, echoArgs) (int, error) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		cur.Add(-1)
		return 1, nil
	}))
	m := &recorder{replies: []reply{calls(call("1", "probe", `{"text":""}`), call("2", "probe", `{"text":""}`), call("3", "probe", `{"text":""}`)), answer("ok")}}
	a := newTestAgent(t, `{`+base+`, "tools": ["probe"], "limits": {"max_parallel_tools": 1}}`, m, probe)
	if _, err := a.Run(context.Background(), map[string]any{"who": "x"}); err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 1 {
		t.Errorf("peak concurrency %d with max_parallel_tools 1", peak.Load())
	}
}

func TestToolFailuresBecomeObservations(t *testing.T) {
	m := &recorder{replies: []reply{
		calls(call("1", "nope", `{}`), call("2", "add", `{"a": "one"}`), call("3", "boom", `{"text": "x"}`), call("4", "slow", `{"text": "x"}`)),
		answer("recovered"),
	}}
	a := newTestAgent(t, `{`+base+`, "tools": ["add", "boom", "slow"], "limits": {"tool_timeouts_ms": {"slow": 5}}}`, m)
	var mu sync.Mutex
	starts, ends := map[string]int{}, map[string]int{}
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Type {
		case event.ToolCallStart:
			starts[e.Tool.ID]++
		case event.ToolCallEnd:
			if starts[e.Tool.ID] != 1 {
				t.Errorf("end before start for %s", e.Tool.ID)
			}
			ends[e.Tool.ID]++
		}
	}))
	if err != nil || res.Result != "recovered" {
		t.Fatalf("%v %v", res.Result, err)
	}
	wantTypes := []string{"unknown_tool", "invalid_arguments", "panic", "timeout"}
	for i, s := range res.Steps {
		var obs tool.Result
		if err := json.Unmarshal([]byte(s.Observation), &obs); err != nil {
			t.Fatalf("observation %q: %v", s.Observation, err)
		}
		if obs.Status != tool.StatusError || obs.Error.Type != wantTypes[i] {
			t.Errorf("step %d observation %+v, want %s", i, obs, wantTypes[i])
		}
		if strings.Contains(s.Observation, "goroutine") {
			t.Error("a stack trace reached the model")
		}
	}
	if !strings.Contains(res.Steps[0].Observation, "available tools: [add boom slow]") || !strings.Contains(res.Steps[1].Observation, "a: got string, want integer") ||
		!strings.Contains(res.Steps[1].Observation, "missing property 'b'") {
		t.Errorf("observations do not say what was wrong: %s / %s", res.Steps[0].Observation, res.Steps[1].Observation)
	}
	for _, id := range []string{"1", "2", "3", "4"} {
		if starts[id] != 1 || ends[id] != 1 {
			t.Errorf("call %s: %d starts, %d ends", id, starts[id], ends[id])
		}
	}
	if res.Metrics.ToolErrors != 4 || slices.Contains(res.ToolsUsed, "nope") {
		t.Errorf("metrics %+v tools %v", res.Metrics, res.ToolsUsed)
	}
}

func forever(n int) []reply {
	var rs []reply
	for i := range n {
		rs = append(rs, calls(call(string(rune('a'+i)), "add", `{"a": 1, "b": 1}`)))
	}
	return rs
}

func TestEndings(t *testing.T) {
	pricing := llm.DefaultPricing().With(mustPricing(t, `{"models": {"m": {"prompt": 1000, "completion": 1000}}}`))
	tests := []struct {
		name       string
		limits     string
		replies    []reply
		abort      bool
		wantErr    error
		wantReason TerminateReason
		wantCode   string
		wantTurns  int
		wantCalls  int
	}{
		{"max turns", `{"max_turns": 2}`, forever(5), false, ErrMaxTurns, ReasonMaxTurns, CodeMaxTurns, 2, 2},
		{"timeout", `{"timeout_ms": 20}`, []reply{calls(call("a", "add", `{"a":1,"b":1}`)), {wait: true}}, false, ErrTimeout, ReasonTimeout, CodeTimeout, 2, 1},
		{"abort", `{}`, []reply{calls(call("a", "add", `{"a":1,"b":1}`)), {wait: true}}, true, ErrAborted, ReasonAborted, CodeAborted, 2, 1},
		{"token budget", `{"max_total_tokens": 20}`, forever(5), false, ErrBudgetExceeded, ReasonBudgetExceeded, CodeBudgetExceeded, 2, 1},
		{"token budget reached", `{"max_total_tokens": 30}`, forever(5), false, ErrBudgetExceeded, ReasonBudgetExceeded, CodeBudgetExceeded, 2, 2},
		{"cost budget", `{"max_cost_usd": 0.02}`, forever(5), false, ErrBudgetExceeded, ReasonBudgetExceeded, CodeBudgetExceeded, 2, 1},
		{"tool-call budget", `{"max_tool_calls": 2}`, []reply{calls(call("a", "add", `{"a":1,"b":1}`)),
			calls(call("b", "add", `{"a":1,"b":1}`), call("c", "add", `{"a":1,"b":1}`))}, false, ErrBudgetExceeded, ReasonBudgetExceeded, CodeBudgetExceeded, 2, 1},
		{"model error", `{}`, []reply{{err: &llm.APIError{Kind: llm.KindAuth, Message: "bad key"}}}, false, llm.ErrAuth, ReasonError, CodeLLMError, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &recorder{replies: tt.replies}
			s := mustSpec(t, `{`+base+`, "tools": ["add"], "limits": `+tt.limits+`}`)
			a, err := New(s, WithProvider(m, "test"), WithTools(testTools(t)), WithPricing(pricing))
			if err != nil {
				t.Fatal(err)
			}
			var opts []RunOption
			var sess *Session
			if tt.abort {
				opts = append(opts, WithEvents(func(e event.Event) {
					if e.Type == event.TurnStart && e.Turn == 2 {
						sess.Abort()
					}
				}))
			}
			var starts, ends, skipped int
			opts = append(opts, WithEvents(func(e event.Event) {
				switch e.Type {
				case event.ToolCallStart:
					starts++
				case event.ToolCallEnd:
					ends++
					if e.Tool.Status == "skipped" && strings.Contains(e.Tool.Error, "was not run") {
						skipped++
					}
				}
			}, event.Block()))
			sess, err = a.NewSession(map[string]any{"who": "x"}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := sess.Run(context.Background())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if res == nil || res.Success || res.TerminateReason != tt.wantReason || res.Error == nil || res.Error.Code != tt.wantCode {
				t.Fatalf("result %+v", res)
			}
			if res.Iterations != tt.wantTurns || res.Metrics.ToolCalls != tt.wantCalls || len(res.Steps) != tt.wantCalls {
				t.Errorf("turns %d tool calls %d, want %d and %d", res.Iterations, res.Metrics.ToolCalls, tt.wantTurns, tt.wantCalls)
			}
			// The events match the transcript: every answered call, a
			// skipped one included, has its start and its end.
			answered := 0
			for _, m := range res.Messages {
				if m.Role == llm.RoleTool {
					answered++
				}
			}
			if starts != answered || ends != answered || skipped != answered-tt.wantCalls {
				t.Errorf("%d starts, %d ends (%d skipped) for %d answered calls, %d run", starts, ends, skipped, answered, tt.wantCalls)
			}
			wantOutcome := OutcomePartial
			if tt.wantReason == ReasonError {
				wantOutcome = OutcomeError
			}
			if res.Outcome != wantOutcome || res.FinishedAt.Before(res.StartedAt.Time) || res.Confidence > 0.3 {
				t.Errorf("outcome %s confidence %v", res.Outcome, res.Confidence)
			}
		})
	}
}

func mustPricing(t testing.TB, js string) *llm.Pricing {
	p, err := llm.ParsePricing([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAbortBeforeRun(t *testing.T) {
	a := newTestAgent(t, `{`+base+`}`, &recorder{replies: []reply{answer("never")}})
	s, err := a.NewSession(map[string]any{"who": "x"})
	if err != nil {
		t.Fatal(err)
	}
	s.Abort()
	res, err := s.Run(context.Background())
	if !errors.Is(err, ErrAborted) || res.Iterations != 0 {
		t.Errorf("%v %d", err, res.Iterations)
	}
	if _, err := s.Run(context.Background()); !errors.Is(err, ErrSessionUsed) {
		t.Errorf("second run: %v", err)
	}

	// A stored run aborted before it began is on record, ended aborted:
	// its id may have been given out (a server answers it at once).
	st := openStore(t, testdb.SQLite(t))
	s, err = a.NewSession(map[string]any{"who": "x"}, WithStore(st))
	if err != nil {
		t.Fatal(err)
	}
	s.Abort()
	if _, err := s.Run(context.Background()); !errors.Is(err, ErrAborted) {
		t.Fatal(err)
	}
	if run, err := st.Get(context.Background(), s.RunID()); err != nil || run.Status != store.Aborted {
		t.Errorf("the stored run: %+v, %v", run, err)
	}
}

func TestModelRetries(t *testing.T) {
	m := scriptModel(t, `{"turns": [
		{"error": {"status": 429, "message": "slow down", "retry_after_ms": 1}},
		{"error": {"status": 503, "message": "busy"}},
		{"content": "done", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}]}`)
	a := newTestAgent(t, `{`+base+`, "retry": {"attempts": 3, "initial_backoff_ms": 1, "max_backoff_ms": 2}}`, m)
	var retries []event.Event
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		if e.Type == event.Retry {
			retries = append(retries, e)
		}
	}))
	if err != nil || res.Result != "done" {
		t.Fatalf("%v %v", res, err)
	}
	if len(retries) != 2 || retries[0].Attempt != 1 || retries[1].Attempt != 2 || !strings.Contains(retries[0].Error.Message, "slow down") {
		t.Errorf("retry events %+v", retries)
	}
	if len(res.ModelCalls) != 1 || res.ModelCalls[0].Attempts != 3 {
		t.Errorf("model calls %+v", res.ModelCalls)
	}
}

func TestModelErrorMatchesAPIError(t *testing.T) {
	m := scriptModel(t, `{"turns": [{"error": {"status": 400, "message": "bad request"}}]}`)
	a := newTestAgent(t, `{`+base+`}`, m)
	res, err := a.Run(context.Background(), map[string]any{"who": "x"})
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || res.Outcome != OutcomeError || res.ModelCalls[0].Error == "" {
		t.Errorf("%v %+v", err, res)
	}
}

func TestEventOrder(t *testing.T) {
	m := &recorder{replies: []reply{
		{resp: &llm.Response{Content: "adding", ToolCalls: []llm.ToolCall{call("a", "add", `{"a":1,"b":1}`)}}},
		answer("2"),
	}}
	a := newTestAgent(t, `{`+base+`, "tools": ["add"]}`, m)
	var types []string
	var last uint64
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		types = append(types, string(e.Type))
		if e.Seq != last+1 || e.RunID == "" || e.AgentName != "calc" || e.Time.IsZero() {
			t.Errorf("event %+v", e)
		}
		last = e.Seq
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := "run_start turn_start thinking tool_call_start tool_call_end turn_end turn_start turn_end run_end"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	if res.ID == "" || !strings.HasPrefix(res.ID, "run_") {
		t.Errorf("id %q", res.ID)
	}
}

func TestStreamingChunksReachSubscribers(t *testing.T) {
	m := scriptModel(t, `{"turns": [{"content": "`+strings.Repeat("one two three four ", 20)+`"}]}`)
	a := newTestAgent(t, `{`+base+`}`, m)
	var text strings.Builder
	chunks := 0
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		if e.Type == event.ContentChunk {
			chunks++
			text.WriteString(e.Content)
		}
	}))
	// The text comes in pieces a little behind the provider, and whole.
	if err != nil || chunks < 4 || text.String() != res.RawContent {
		t.Errorf("%d chunks %q vs %q, %v", chunks, text.String(), res.RawContent, err)
	}
}

func TestInputErrors(t *testing.T) {
	a := newTestAgent(t, `{`+base+`, "mode": "tools", "purpose_text": "Use ${tone}.", "input_schema": {"type": "object", "properties": {"who": {"type": "string", "minLength": 2}, "tone": {"type": "string"}}}}`,
		&recorder{})
	_, err := a.NewSession(map[string]any{"x": 1})
	if !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("err = %v", err)
	}
	for _, w := range []string{`missing input key "who"`, "${who}", "${tone}"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err %q lacks %q", err, w)
		}
	}
	_, err = a.NewSession(map[string]any{"who": "x", "tone": "dry"})
	if err == nil || !strings.Contains(err.Error(), "who:") {
		t.Errorf("schema: %v", err)
	}
	// Run returns a Result for bad input too.
	res, err := a.Run(context.Background(), map[string]any{"x": 1})
	if !errors.Is(err, ErrInvalidInput) || res == nil {
		t.Fatalf("Run of bad input: %v, %v", res, err)
	}
	if res.Success || res.Outcome != OutcomeError || res.TerminateReason != ReasonError || res.Error == nil ||
		res.Error.Code != CodeValidation || res.Error.Recoverable || !strings.Contains(res.Error.Message, `missing input key "who"`) ||
		res.ID == "" || res.AgentName != "calc" || res.Steps == nil || res.Messages == nil || res.FinishedAt.IsZero() {
		t.Errorf("result of bad input: %+v", res)
	}
	if probs, _ := res.Error.Details["problems"].([]string); len(probs) != 3 {
		t.Errorf("problems %v", res.Error.Details["problems"])
	}
}

func TestSubAgents(t *testing.T) {
	a, err := FromDir("testdata/agents", "boss", WithTools(testTools(t)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var helperEvents []event.Event
	var bossRun string
	res, err := a.Run(context.Background(), nil, WithEvents(func(e event.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.AgentName == "helper" {
			helperEvents = append(helperEvents, e)
		} else if e.Type == event.RunStart {
			bossRun = e.RunID
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps[0].Observation != `"The word means a small helper."` {
		t.Errorf("sub-agent output %q", res.Steps[0].Observation)
	}
	if res.TokenUsage.TotalTokens != 144+250 {
		t.Errorf("usage %+v: the helper's did not roll up", res.TokenUsage)
	}
	wantCost := (130*0.40 + 14*1.60 + 220*0.40 + 30*1.60) / 1e6
	if d := *res.EstimatedCost - wantCost; d > 1e-12 || d < -1e-12 {
		t.Errorf("cost %v, want %v", res.EstimatedCost, wantCost)
	}
	agents := map[string]int{}
	for _, c := range res.ModelCalls {
		agents[c.Agent]++
	}
	if len(res.ModelCalls) != 4 || agents["helper"] != 2 {
		t.Errorf("model calls %+v", res.ModelCalls)
	}
	if len(helperEvents) == 0 || helperEvents[0].Type != event.RunStart || helperEvents[0].ParentRunID != bossRun {
		t.Errorf("helper events %+v (boss run %s)", helperEvents, bossRun)
	}
}

func TestResultJSON(t *testing.T) {
	a := newTestAgent(t, `{`+base+`, "tools": ["add"]}`, &recorder{replies: []reply{calls(call("a", "add", `{"a":1,"b":1}`)), answer("2")}})
	res, err := a.Run(context.Background(), map[string]any{"who": "x"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"id", "session_id", "agent_name", "agent_version", "success", "outcome", "result", "raw_content",
		"terminate_reason", "started_at", "finished_at", "iterations", "steps", "messages", "tools_used", "token_usage",
		"estimated_cost_usd", "model", "provider", "model_calls", "confidence", "decision", "metrics"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result JSON lacks %q", k)
		}
	}
	ts := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	if !ts.MatchString(m["started_at"].(string)) {
		t.Errorf("started_at %v is not RFC 3339 with milliseconds", m["started_at"])
	}
	step := m["steps"].([]any)[0].(map[string]any)
	action := step["action"].(map[string]any)
	if action["tool"] != "add" || action["output"] != 2.0 || step["observation"] != "2" {
		t.Errorf("step %v", step)
	}
}

func TestModesNotYetAvailable(t *testing.T) {
	a := newTestAgent(t, `{"agent_name": "c", "version": "v1", "mode": "plan"}`, &recorder{})
	res, err := a.Run(context.Background(), nil)
	if !errors.Is(err, ErrConfig) || res.Error.Code != CodeConfigError || !IsConfigError(err) {
		t.Errorf("%v %+v", err, res.Error)
	}
}

func TestPanicsDoNotEscape(t *testing.T) {
	a := newTestAgent(t, `{`+base+`}`, scriptedPanic{})
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		if e.Type == event.TurnStart {
			panic("listener bug")
		}
	}))
	var ae *llm.APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, "provider panicked: model bug") || res.Outcome != OutcomeError {
		t.Errorf("%v %+v", err, res)
	}
}

type scriptedPanic struct{}

func (scriptedPanic) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	panic("model bug")
}

func TestFallbackModels(t *testing.T) {
	s := mustSpec(t, `{"agent_name": "fb", "version": "v1", "model_name": "scripted:testdata/scripts/busy.json",
		"fallback_models": [{"model_name": "scripted:testdata/scripts/spare.json"}],
		"retry": {"attempts": 2, "initial_backoff_ms": 1, "max_backoff_ms": 1}}`)
	a, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	var retries []event.Event
	res, err := a.Run(context.Background(), nil, WithEvents(func(e event.Event) {
		if e.Type == event.Retry {
			retries = append(retries, e)
		}
	}))
	if err != nil || res.Result != "answered by the spare" || res.Model != "gpt-4.1-mini" {
		t.Fatalf("%v %+v", err, res)
	}
	if len(retries) != 2 || retries[1].Data["fallback_to"] != "scripted:testdata/scripts/spare.json" {
		t.Errorf("retry events %+v", retries)
	}
	// Each model the turn tried is itemised: the busy one failed after
	// its 2 attempts, the spare answered at its first.
	mc := res.ModelCalls
	if len(mc) != 2 || mc[0].Model != "testdata/scripts/busy.json" || mc[0].Attempts != 2 || !strings.Contains(mc[0].Error, "still overloaded") ||
		mc[1].Model != "gpt-4.1-mini" || mc[1].Attempts != 1 || mc[1].Error != "" || mc[0].Turn != 1 || mc[1].Turn != 1 {
		t.Errorf("model calls %+v: want the busy model's 2 failed attempts, then the spare's answer", mc)
	}
}

func TestSpecProviderField(t *testing.T) {
	s := mustSpec(t, `{"agent_name": "p", "version": "v1", "provider": "scripted", "model_name": "testdata/scripts/spare.json"}`)
	a, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background(), nil)
	if err != nil || res.Provider != "scripted" || res.Result != "answered by the spare" {
		t.Errorf("%v %+v", err, res)
	}
}

// brokenStream streams some text, then breaks.
type brokenStream struct{ recorder }

func (b *brokenStream) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if !yield(llm.Chunk{Text: "half an ans"}, nil) {
			return
		}
		yield(llm.Chunk{}, &llm.APIError{Kind: llm.KindTransient, Message: "stream broken: connection reset"})
	}
}

func TestBrokenStreamKeptInTrace(t *testing.T) {
	a := newTestAgent(t, `{`+base+`, "retry": {"attempts": 1}}`, &brokenStream{})
	var chunks []string
	res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
		if e.Type == event.ContentChunk {
			chunks = append(chunks, e.Content)
		}
	}))
	if !errors.Is(err, llm.ErrTransient) || strings.Join(chunks, "") != "half an ans" {
		t.Fatalf("%v %v", err, chunks)
	}
	if mc := res.ModelCalls[0]; mc.Partial != "half an ans" || !strings.Contains(mc.Error, "connection reset") {
		t.Errorf("model call %+v", mc)
	}
}

func TestStateIsSerialisable(t *testing.T) {
	a := newTestAgent(t, `{`+base+`, "tools": ["add"]}`, &recorder{replies: []reply{calls(call("a", "add", `{"a":1,"b":2}`)), answer("3")}})
	s, err := a.NewSession(map[string]any{"who": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := s.State()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(back)
	if string(again) != string(data) {
		t.Errorf("state does not survive JSON:\n%s\n%s", data, again)
	}
	if back.Turn != 2 || len(back.Messages) != 5 || len(back.Steps) != 1 || back.Steps[0].Action.Tool != "add" || back.Usage.TotalTokens != 30 {
		t.Errorf("state %+v", back)
	}
}

// Each error ends a run with its own code: an input the memory stream
// cannot name is a validation_error, a host planner's own error an
// internal_error; neither is reported as the model's.
func TestErrorCodesOutsideTheModel(t *testing.T) {
	mem := mustSpec(t, `{"agent_name": "m", "version": "v1", "model_name": "x", "mode": "tools", "purpose_text": "${task}",
		"input_schema": {"type": "object", "properties": {"task": {"type": "string"}, "team": {"type": "string"}}},
		"memory": {"stream": "team:${team}", "load_last": 5}}`)
	plain := mustSpec(t, `{"agent_name": "p", "version": "v1", "model_name": "x"}`)
	for _, tc := range []struct {
		name string
		sp   *spec.Spec
		opts []Option
		code string
		is   error
	}{
		{"a missing stream variable", mem, []Option{WithMemory(inmem.New())}, CodeValidation, ErrInvalidInput},
		{"a planner's own error", plain, []Option{WithPlanner(PlannerFunc(func(context.Context, *Turn) (Decision, error) {
			return Decision{}, errors.New("the host's index is offline")
		}))}, CodeInternal, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(tc.sp, append([]Option{WithProvider(&recorder{}, "scripted")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(context.Background(), map[string]any{"task": "t"})
			if err == nil || res.Error == nil || res.Error.Code != tc.code || errors.Is(err, ErrModel) {
				t.Fatalf("run: %v, %+v; want code %s", err, res.Error, tc.code)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v does not match %v", err, tc.is)
			}
		})
	}
}

// piecesStream streams its pieces, the way a provider's tokens fall.
type piecesStream struct {
	recorder
	pieces []string
}

func (s *piecesStream) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for _, piece := range s.pieces {
			if !yield(llm.Chunk{Text: piece}, nil) {
				return
			}
		}
	}
}

func (s *piecesStream) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return llm.Collect(s.Stream(ctx, req), nil)
}

// TestStreamedSecretRedacted attacks redaction through streaming: a
// secret cut between chunks, a bearer header whose token comes in
// pieces, one in a single chunk, a PEM key at the end of the answer, a
// spaced card number. No content_chunk event holds any of it, and the
// streamed text adds up to the answer as the Result has it. Text with
// nothing to hide (Chinese, JSON) still streams in pieces.
func TestStreamedSecretRedacted(t *testing.T) {
	const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----"
	long := strings.Repeat("words come one by one ", 8)
	tests := []struct {
		name    string
		pieces  []string
		secrets []string
		chunks  int // at least this many events
	}{
		{"a key cut in two", []string{"the key is sk-proj-CANARY", "split0123456789abcdefghij", " and", " more"},
			[]string{"CANARY", "0123456789abcdefghij"}, 1},
		{"a bearer header in tokens", []string{long, "Authorization: Bearer", " abcdefghij", "klmnopqrstuv", "wxyz012345", " ok ", long},
			[]string{"abcdefghij", "wxyz012345"}, 2},
		{"a bearer header in one chunk", []string{long + "use Bearer abcdefghijklmnopqrstuvwxyz012345 " + long},
			[]string{"abcdefghijklmnopqrstuvwxyz"}, 1},
		{"a PEM key at the end", append(strings.SplitAfter(long+"here: "+pem, " "), ""),
			[]string{"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "VJTUt9Us8cKjMzEfYyjiWA4R4"}, 2},
		{"Chinese text", strings.Split(strings.Repeat("这是一段没有空格的中文文本。", 10), "。"), nil, 5},
		{"JSON", strings.SplitAfter(strings.Repeat(`{"name":"x","value":12},`, 20), ","), nil, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAgent(t, `{`+base+`}`, &piecesStream{pieces: tt.pieces})
			var text strings.Builder
			chunks := 0
			res, err := a.Run(context.Background(), map[string]any{"who": "x"}, WithEvents(func(e event.Event) {
				if e.Type == event.ContentChunk {
					chunks++
					text.WriteString(e.Content)
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range tt.secrets {
				if strings.Contains(text.String(), secret) {
					t.Errorf("the streamed text holds %q: %q", secret, text.String())
				}
			}
			if res.RawContent != text.String() || chunks < tt.chunks {
				t.Errorf("%d events; streamed %q\nresult %q", chunks, text.String(), res.RawContent)
			}
		})
	}
}

// TestScriptPlaysAnewEachRun: a spec's scripted model plays its script
// from the first turn in each run that is part of none (every run of a
// one-turn script answers), while the runs that are part of another
// share one player, which goes on where the last left it (a pipeline's
// stage run again plays its next turns): the second finds no turn left.
func TestScriptPlaysAnewEachRun(t *testing.T) {
	a, err := New(mustSpec(t, `{"agent_name": "once", "version": "v1", "model_name": "scripted:testdata/scripts/spare.json"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	for i, tc := range []struct {
		parent string
		want   bool
	}{{"", true}, {"", true}, {"run_parent", true}, {"run_parent", false}, {"", true}} {
		res, err := a.Run(ctx, nil, WithParentRunID(tc.parent))
		if got := err == nil && res.Outcome == OutcomeSuccess; got != tc.want {
			t.Errorf("run %d (parent %q): %v, %v; want success %v", i+1, tc.parent, err, res, tc.want)
		}
	}
}
