package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/agent/drive"
	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/runlog"
	"github.com/agentry/agentry/tool"
	"github.com/agentry/agentry/tool/kv"

	"github.com/agentry/agentry/llm/scripted"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func kvTools(t testing.TB) *tool.Registry {
	r, err := tool.NewRegistry(kv.Tools(kv.NewStore())...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// service is an inline service-mode agent.
func service(name string) string {
	return `{"agent_name": "` + name + `", "version": "v1", "mode": "service"}`
}

// build compiles a pipeline of service stages whose outputs come from the
// given functions, called in turn on each visit.
func build(t *testing.T, def string, outputs map[string][]map[string]any, opts ...Option) *Pipeline {
	t.Helper()
	d, err := Parse("test", []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	for name, outs := range outputs {
		visits := 0
		opts = append(opts, WithHooks(name, Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) {
			o := outs[min(visits, len(outs)-1)]
			visits++
			return o, nil
		}}))
	}
	p, err := New(d, ".", append(opts, WithTools(kvTools(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func stages(res *Result) string {
	var s []string
	for _, h := range res.Envelope.History {
		s = append(s, h.Stage+":"+string(h.Outcome))
	}
	return strings.Join(s, " ")
}

const abc = `{"pipeline_name": "p", "version": "v1", "max_hops": 8, "stages": [
	{"name": "a", "agent": ` + `AGENT_A` + `, "routing_rules": [{"condition": "route.to", "value": "c", "target": "c"}]},
	{"name": "b", "agent": ` + `AGENT_B` + `, "loop_target": "a"},
	{"name": "c", "agent": ` + `AGENT_C` + `}]}`

func abcDef() string {
	r := strings.NewReplacer("AGENT_A", service("a"), "AGENT_B", service("b"), "AGENT_C", service("c"))
	return r.Replace(abc)
}

func TestRoutingAndOutcomes(t *testing.T) {
	noRoute := map[string]any{"route": map[string]any{"to": "b"}}
	tests := []struct {
		name     string
		a, b, c  []map[string]any
		want     string
		outcome  agent.Outcome
		reason   agent.TerminateReason
		success  bool
		errIs    error
		errField string
	}{
		{"default next", []map[string]any{noRoute}, []map[string]any{{"x": 1}}, []map[string]any{{"y": 2}},
			"a:success b:success c:success", agent.OutcomeSuccess, agent.ReasonCompleted, true, nil, ""},
		{"rule on nested field", []map[string]any{{"route": map[string]any{"to": "c"}}}, nil, []map[string]any{{"y": 2}},
			"a:success c:success", agent.OutcomeSuccess, agent.ReasonCompleted, true, nil, ""},
		{"a rule on a missing field does not match", []map[string]any{{"other": 1}}, []map[string]any{{"x": 1}}, []map[string]any{{"y": 2}},
			"a:success b:success c:success", agent.OutcomeSuccess, agent.ReasonCompleted, true, nil, ""},
		{"a rule on a missing nested field does not match", []map[string]any{{"route": "c"}}, []map[string]any{{"x": 1}}, []map[string]any{{"y": 2}},
			"a:success b:success c:success", agent.OutcomeSuccess, agent.ReasonCompleted, true, nil, ""},
		{"loop_back to loop_target, then on", []map[string]any{noRoute}, []map[string]any{{"outcome": "loop_back"}, {"outcome": "success"}}, []map[string]any{{}},
			"a:success b:loop_back a:success b:success c:success", agent.OutcomeSuccess, agent.ReasonCompleted, true, nil, ""},
		{"replan goes to start", []map[string]any{noRoute}, []map[string]any{{"outcome": "replan"}, {}}, []map[string]any{{}},
			"a:success b:replan a:success b:success c:success", agent.OutcomeSuccess, agent.ReasonCompleted, true, nil, ""},
		{"loops bounded by max_hops", []map[string]any{noRoute}, []map[string]any{{"outcome": "loop_back"}}, nil,
			"a:success b:loop_back a:success b:loop_back a:success b:loop_back a:success b:loop_back", agent.OutcomeError, agent.ReasonMaxTurns, false, ErrMaxHops, "stage a would be hop 9"},
		{"terminate", []map[string]any{{"outcome": "terminate", "route": map[string]any{"to": "b"}}}, nil, nil,
			"a:terminate", agent.OutcomeTerminate, agent.ReasonCompleted, true, nil, ""},
		{"skip stores nothing", []map[string]any{noRoute}, []map[string]any{{"outcome": "skip"}}, []map[string]any{{"y": 1}},
			"a:success b:skip c:success", agent.OutcomeSuccess, agent.ReasonCompleted, true, nil, ""},
		{"partial", []map[string]any{noRoute}, []map[string]any{{}}, []map[string]any{{"outcome": "partial"}},
			"a:success b:success c:partial", agent.OutcomePartial, agent.ReasonCompleted, true, nil, ""},
		{"error outcome", []map[string]any{noRoute}, []map[string]any{{"outcome": "error", "error": "disk full"}}, nil,
			"a:success b:error", agent.OutcomeError, agent.ReasonError, false, ErrStageFailed, "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outs := map[string][]map[string]any{"a": tt.a, "b": tt.b, "c": tt.c}
			for k, v := range outs {
				if v == nil {
					delete(outs, k)
				}
			}
			res, err := build(t, abcDef(), outs).Run(context.Background(), map[string]any{"task": "t"})
			if tt.errIs != nil {
				if !errors.Is(err, tt.errIs) || !strings.Contains(err.Error(), tt.errField) {
					t.Fatalf("err = %v, want %v about %s", err, tt.errIs, tt.errField)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := stages(res); got != tt.want {
				t.Errorf("stages %q, want %q", got, tt.want)
			}
			if res.Outcome != tt.outcome || res.TerminateReason != tt.reason || res.Success != tt.success || res.Iterations != len(res.Envelope.History) {
				t.Errorf("outcome %s reason %s success %v iterations %d", res.Outcome, res.TerminateReason, res.Success, res.Iterations)
			}
			if tt.name == "skip stores nothing" {
				if _, ok := res.Envelope.Outputs["b"]; ok {
					t.Error("a skipped stage stored output")
				}
			}
		})
	}
}

func TestPauseAndResume(t *testing.T) {
	for _, outcome := range []string{"clarify", "confirm"} {
		t.Run(outcome, func(t *testing.T) {
			var seen []any
			d, _ := Parse("test", []byte(abcDef()))
			p, err := New(d, ".", WithHooks("a", Hooks{Work: func(_ context.Context, env *Envelope) (map[string]any, error) {
				return map[string]any{"route": map[string]any{"to": "b"}}, nil
			}}), WithHooks("b", Hooks{Work: func(_ context.Context, env *Envelope) (map[string]any, error) {
				ans, ok := env.Metadata["user_response"]
				seen = append(seen, ans)
				if !ok {
					return map[string]any{"outcome": outcome, "question": "Which environment?"}, nil
				}
				return map[string]any{"env": ans}, nil
			}}), WithHooks("c", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) { return map[string]any{}, nil }}))
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Run(context.Background(), nil)
			if err != nil || res.Outcome != agent.Outcome(outcome) || res.TerminateReason != agent.ReasonAwaitingApproval || res.Success {
				t.Fatalf("%v %+v", err, res.Result)
			}
			pend := res.Envelope.Pending
			if pend == nil || pend.Stage != "b" || pend.Question != "Which environment?" || res.Envelope.Current != "b" {
				t.Fatalf("pending %+v", pend)
			}
			// The envelope survives JSON, as a stored pause would.
			data, _ := json.Marshal(res.Envelope)
			var env Envelope
			if err := json.Unmarshal(data, &env); err != nil {
				t.Fatal(err)
			}
			res, err = p.Resume(context.Background(), &env, "staging")
			if err != nil || !res.Success || stages(res) != "a:success b:"+outcome+" b:success c:success" {
				t.Fatalf("%v %s", err, stages(res))
			}
			if res.Envelope.Outputs["b"]["env"] != "staging" || res.Envelope.HopCount != 4 {
				t.Errorf("outputs %v hops %d", res.Envelope.Outputs, res.Envelope.HopCount)
			}
			if _, err := p.Resume(context.Background(), res.Envelope, "again"); !errors.Is(err, ErrNotPaused) {
				t.Errorf("resume of a finished run: %v", err)
			}
		})
	}
}

func TestLifecycleFailures(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		hooks Hooks
		def   string
		errIs error
		want  string
	}{
		{"pre-process", Hooks{PreProcess: func(context.Context, *Envelope) error { return boom }}, abcDef(), ErrHook, "stage a: pre-process: boom"},
		{"post-process", Hooks{PostProcess: func(context.Context, *Envelope, map[string]any) error { return boom }}, abcDef(), ErrHook, "stage a: post-process: boom"},
		{"service", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) { return nil, boom }}, abcDef(), ErrHook, "stage a: service: boom"},
		{"required field", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) { return map[string]any{"x": 1}, nil }},
			strings.Replace(abcDef(), `"routing_rules"`, `"required_output_fields": ["steps"], "routing_rules"`, 1), ErrMissingOutput, `stage a: output has no field "steps"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse("test", []byte(tt.def))
			if err != nil {
				t.Fatal(err)
			}
			h := tt.hooks
			if h.Work == nil {
				h.Work = func(context.Context, *Envelope) (map[string]any, error) {
					return map[string]any{"route": map[string]any{"to": "b"}}, nil
				}
			}
			p, _ := New(d, ".", WithHooks("a", h))
			res, err := p.Run(context.Background(), nil)
			if !errors.Is(err, tt.errIs) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v", err)
			}
			if len(res.Envelope.History) != 1 || res.Envelope.History[0].Error == "" || len(res.Envelope.Errors) != 1 ||
				res.Envelope.Errors[0].Stage != "a" || res.Error.Details["stage"] != "a" {
				t.Errorf("envelope %+v error %+v", res.Envelope, res.Error)
			}
		})
	}
}

func TestMock(t *testing.T) {
	d, _ := Parse("test", []byte(abcDef()))
	mocked := false
	p, _ := New(d, ".", WithMock(true), WithHooks("a", Hooks{Mock: func(context.Context, *Envelope) (map[string]any, error) {
		mocked = true
		return map[string]any{"route": map[string]any{"to": "c"}}, nil
	}}))
	res, err := p.Run(context.Background(), nil)
	if err != nil || !mocked || stages(res) != "a:success c:success" {
		t.Errorf("%v %v %s", err, mocked, stages(res))
	}
}

func TestPlanMode(t *testing.T) {
	def := `{"pipeline_name": "p", "version": "v1", "stages": [
		{"name": "planner", "agent": ` + service("planner") + `, "output_key": "plan"},
		{"name": "executor", "agent": {"agent_name": "executor", "version": "v1", "mode": "plan", "tools": ["kv_set", "kv_get"]}, "output_key": "execution"}]}`
	plan := map[string]any{"steps": []any{
		map[string]any{"tool": "kv_set", "parameters": map[string]any{"key": "k", "value": 1}},
		map[string]any{"tool": "kv_get", "parameters": map[string]any{"key": "missing"}},
		map[string]any{"tool": "kv_delete", "parameters": map[string]any{"key": "k"}},
		map[string]any{"tool": "kv_get", "parameters": map[string]any{"key": "k"}},
		map[string]any{"tool": "kv_set", "parameters": map[string]any{"value": 1}},
	}}
	var toolEvents []string
	res, err := build(t, def, map[string][]map[string]any{"planner": {plan}}).Run(context.Background(), nil, WithEvents(func(e event.Event) {
		if e.Type == event.ToolCallEnd {
			toolEvents = append(toolEvents, e.Tool.Name+":"+e.Tool.Status)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	exec := res.Envelope.Outputs["execution"]
	if exec["succeeded"] != 2 || exec["failed"] != 3 || res.Envelope.History[1].Outcome != agent.OutcomePartial {
		t.Fatalf("execution %v", exec)
	}
	results := exec["results"].([]any)
	errType := func(i int) string {
		e, _ := results[i].(map[string]any)["error"].(*tool.ErrorDetails)
		if e == nil {
			return ""
		}
		return e.Type
	}
	if errType(1) != "not_found" || errType(2) != "unknown_tool" || errType(3) != "" || errType(4) != "invalid_arguments" {
		t.Errorf("results %v", results)
	}
	if d, _ := results[3].(map[string]any)["data"].(map[string]any); d["value"] != 1.0 {
		t.Errorf("step 4 data %v", d)
	}
	if strings.Join(toolEvents, " ") != "kv_set:success kv_get:error kv_delete:error kv_get:success kv_set:error" {
		t.Errorf("tool events %v", toolEvents)
	}
	if !strings.Contains(fmt.Sprint(results[2]), `there is no tool "kv_delete"; available tools: [kv_get kv_set]`) {
		t.Errorf("forbidden step %v", results[2])
	}
}

func TestDefinitionErrors(t *testing.T) {
	svc := service("x")
	tests := []struct{ def, want string }{
		{`{"version": "v1", "stages": [{"name": "a", "agent": ` + svc + `}]}`, "pipeline_name is required"},
		{`{"pipeline_name": "p", "version": "v1", "stages": []}`, "at least one stage"},
		{`{"pipeline_name": "p", "version": "v1", "stagse": []}`, `unknown field "stagse"`},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a", "agent": ` + svc + `, "routing_rules": [{"condition": "x", "value": 1, "target": "nowhere"}]}]}`,
			`stage a: routing_rules[0]: target "nowhere" does not exist`},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a", "agent": ` + svc + `}, {"name": "a", "agent": ` + svc + `}]}`, "stage a: the name is used twice"},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a", "agent": ` + svc + `, "default_next": "end"}, {"name": "b", "agent": ` + svc + `}]}`,
			`stage b is unreachable from start "a"`},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a", "agent": ` + svc + `, "default_next": "b"}, {"name": "b", "agent": ` + svc + `, "default_next": "a"}]}`,
			"stage a is in a cycle without an exit"},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "end", "agent": ` + svc + `}]}`, `"end" is reserved`},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a"}]}`, "stage a: agent is required"},
		{`{"pipeline_name": "p", "version": "v1", "start": "z", "stages": [{"name": "a", "agent": ` + svc + `}]}`, `start: there is no stage "z"`},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a", "agent": ` + svc + `, "loop_target": "q"}]}`, `loop_target "q" does not exist`},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a", "agent": {"agent_name": "x", "version": "v1", "mode": "plan", "tolls": []}}]}`, `unknown field "tolls"`},
		{`{"pipeline_name": "p", "version": "v1", "stages": [{"name": "a", "agent": "ghost@v1"}]}`, `stage a: unknown agent ghost@v1`},
	}
	for _, tt := range tests {
		d, err := Parse("p.json", []byte(tt.def))
		if err == nil {
			_, err = New(d, ".")
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\nerr = %v, want %q", tt.def, err, tt.want)
		}
	}
}

func TestEventOrder(t *testing.T) {
	p, err := FromFile("../examples/pipelines/review.json", WithTools(kvTools(t)))
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	nested := 0
	res, err := p.Run(context.Background(), map[string]any{"task": "store the release"}, WithEvents(func(e event.Event) {
		if e.ParentRunID != "" {
			nested++
			return
		}
		if e.Type == event.ToolCallStart || e.Type == event.ToolCallEnd {
			return
		}
		s := string(e.Type)
		if st, ok := e.Data["stage"]; ok && e.Type != event.RunStart {
			s += ":" + fmt.Sprint(st)
		}
		top = append(top, s)
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := "run_start agent_started:planner agent_completed:planner agent_started:executor agent_completed:executor agent_started:critic agent_completed:critic " +
		"agent_started:planner agent_completed:planner agent_started:executor agent_completed:executor agent_started:critic agent_completed:critic run_end"
	if got := strings.Join(top, " "); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	if nested == 0 {
		t.Error("the stage agents' own events were not forwarded")
	}
	if stages(res) != "planner:success executor:partial critic:success planner:success executor:success critic:success" {
		t.Errorf("stages %s", stages(res))
	}
	if res.TokenUsage.TotalTokens != 360+435+550+612 || len(res.ModelCalls) != 4 || res.ModelCalls[0].Agent != "planner" {
		t.Errorf("usage %+v calls %d", res.TokenUsage, len(res.ModelCalls))
	}
	if review := res.Envelope.Outputs["review"]; review["approved"] != true {
		t.Errorf("review %v", review)
	}
}

// TestMultiAgentStages runs a handoff and an agent-as-tool inside stages.
func TestMultiAgentStages(t *testing.T) {
	echo := tool.Must(tool.Func("echo", "Echo text.", func(_ context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		return in.Text, nil
	}))
	reg, _ := tool.NewRegistry(echo)
	d, err := Parse("multi", []byte(`{"pipeline_name": "multi", "version": "v1", "stages": [
		{"name": "support", "agent": "triage@v1", "output_key": "support"},
		{"name": "delegate", "agent": "boss@v1", "output_key": "delegate"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(d, ".", WithTools(reg), WithAgentsDir("../agent/testdata/agents"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), map[string]any{"question": "Is invoice 42 paid?"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Envelope.Outputs["support"]["text"]; got != "Invoice 42 is paid." {
		t.Errorf("handoff stage output %v", got)
	}
	if got := res.Envelope.Outputs["delegate"]["text"]; got != "The helper says: a small helper." {
		t.Errorf("agent-as-tool stage output %v", got)
	}
	agents := map[string]bool{}
	for _, c := range res.ModelCalls {
		agents[c.Agent] = true
	}
	if !agents["billing"] || !agents["helper"] || !agents["boss"] || !agents["triage"] {
		t.Errorf("model calls by %v", agents)
	}
}

func TestConfidence(t *testing.T) {
	for _, tt := range []struct {
		success bool
		outcome agent.Outcome
		confs   []float64
		want    float64
	}{
		{true, agent.OutcomeSuccess, nil, 0.9},
		{true, agent.OutcomeSuccess, []float64{0.9, 0.7}, 0.8},
		{false, agent.OutcomeClarify, []float64{0.9}, 0.3},
		{false, agent.OutcomeError, []float64{0.9}, 0},
	} {
		if got := confidence(tt.success, tt.outcome, tt.confs); got != tt.want {
			t.Errorf("confidence(%v, %s, %v) = %v, want %v", tt.success, tt.outcome, tt.confs, got, tt.want)
		}
	}
}

// TestHookPanicIsAnError: a hook that panics fails its stage with an
// error naming the stage, the hook and the panic once.
func TestHookPanicIsAnError(t *testing.T) {
	d, _ := Parse("test", []byte(abcDef()))
	boom := func() { panic("hook bug") }
	for _, tc := range []struct {
		name  string
		hooks Hooks
		want  string
	}{
		{"work", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) { boom(); return nil, nil }},
			"pipeline: hook failed: stage a: panic: hook bug"},
		{"pre-process", Hooks{PreProcess: func(context.Context, *Envelope) error { boom(); return nil }},
			"pipeline: hook failed: stage a: pre-process: panic: hook bug"},
		{"post-process", Hooks{PostProcess: func(context.Context, *Envelope, map[string]any) error { boom(); return nil }},
			"pipeline: hook failed: stage a: post-process: panic: hook bug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := New(d, ".", WithHooks("a", tc.hooks))
			res, err := p.Run(context.Background(), nil)
			if !errors.Is(err, ErrHook) || err.Error() != tc.want || strings.Count(err.Error(), "hook failed") != 1 || res.Envelope.History[0].Stage != "a" {
				t.Errorf("%v, want %s", err, tc.want)
			}
		})
	}
}

// TestSessionOptions passes the user and correlation ids to the stage
// agents, where a tool reads them from its context.
func TestSessionOptions(t *testing.T) {
	whoami := tool.Must(tool.Func("whoami", "Who the run acts for.", func(ctx context.Context, _ struct{}) (string, error) {
		c := tool.CallFrom(ctx)
		return c.Run.UserID + "/" + c.Run.CorrelationID + "/" + c.Run.ParentRunID, nil
	}))
	reg, _ := tool.NewRegistry(whoami)
	d, err := Parse("who", []byte(`{"pipeline_name": "who", "version": "v1", "stages": [
		{"name": "planner", "agent": `+service("planner")+`, "output_key": "plan"},
		{"name": "executor", "agent": {"agent_name": "executor", "version": "v1", "mode": "plan", "tools": ["whoami"]}, "output_key": "execution"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	plan := map[string]any{"steps": []any{map[string]any{"tool": "whoami", "parameters": map[string]any{}}}}
	p, err := New(d, ".", WithTools(reg), WithHooks("planner", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) {
		return plan, nil
	}}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), nil, WithSessionOptions(agent.WithUser("u-1"), agent.WithCorrelationID("req-9")))
	if err != nil {
		t.Fatal(err)
	}
	results := res.Envelope.Outputs["execution"]["results"].([]any)
	got := fmt.Sprint(results[0].(map[string]any)["data"].(map[string]any)["result"])
	if want := "u-1/req-9/" + res.ID; got != want {
		t.Errorf("the tool saw %q, want %q", got, want)
	}
}

// TestLLMStageJSONReply: an LLM stage without an output schema whose
// reply is a JSON object gives the object as its output, so routing
// reads its fields.
func TestLLMStageJSONReply(t *testing.T) {
	script, err := scripted.Parse("json", []byte(`{"turns": [{"content": "{\"ready\": true, \"note\": \"go\"}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse("json", []byte(`{"pipeline_name": "json", "version": "v1", "stages": [
		{"name": "think", "output_key": "think", "agent": {"agent_name": "thinker", "version": "v1", "model_name": "x", "system_text": "Think."},
		 "routing_rules": [{"condition": "ready", "value": true, "target": "act"}], "default_next": "end"},
		{"name": "act", "agent": `+service("act")+`}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(d, ".", WithAgentOptions(agent.WithProvider(script.Model(), "scripted")),
		WithHooks("act", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) { return map[string]any{"done": true}, nil }}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Run(context.Background(), map[string]any{"task": "t"})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Envelope.Outputs["think"]
	if got := stages(res); got != "think:success act:success" || out["ready"] != true || out["note"] != "go" {
		t.Errorf("stages %q, think's output %#v", got, res.Envelope.Outputs["think"])
	}
}

// TestRegisteredStage: a stage names an agent built in Go, found in the
// registry the pipeline is given; the pipeline does not close it.
func TestRegisteredStage(t *testing.T) {
	script, err := scripted.New("greeter", scripted.Turn{Content: `{"greeting": "hello"}`})
	if err != nil {
		t.Fatal(err)
	}
	greeter, err := agent.New(&spec.Spec{AgentName: "greeter", Version: "v1", SystemText: "Greet."}, agent.WithProvider(script.Model(), "scripted"))
	if err != nil {
		t.Fatal(err)
	}
	reg := agent.NewRegistry()
	if err := reg.Register(greeter); err != nil {
		t.Fatal(err)
	}
	d, err := Parse("greet", []byte(`{"pipeline_name": "greet", "version": "v1", "stages": [{"name": "hi", "agent": "greeter", "output_key": "hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(d, t.TempDir(), WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), map[string]any{"task": "t"})
	if err != nil || res.Envelope.Outputs["hi"]["greeting"] != "hello" {
		t.Fatalf("%v: outputs %v", err, res.Envelope.Outputs)
	}
	p.Close()
	// The stage ran the registered instance: its one-turn script is spent.
	if _, err := greeter.Run(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "only 1 turns") {
		t.Errorf("the stage did not run the registered agent: %v", err)
	}
}

type planStep struct {
	Tool       string         `json:"tool"`
	Parameters map[string]any `json:"parameters"`
}

// TestProcessEnvelopes: a pipeline runs on an envelope the caller built,
// from text or a map, whole or one stage at a time; Go values a hook
// returns (typed slices, structs, ints) are JSON values to routing and
// plans.
func TestProcessEnvelopes(t *testing.T) {
	def := `{"pipeline_name": "p", "version": "v1", "stages": [
		{"name": "planner", "agent": ` + service("planner") + `, "output_key": "plan",
		 "routing_rules": [{"condition": "count", "value": 2, "target": "executor"}], "default_next": "end"},
		{"name": "executor", "agent": {"agent_name": "executor", "version": "v1", "mode": "plan", "tools": ["kv_set", "kv_get"]}, "output_key": "execution"}]}`
	var sawTask any
	plan := func(_ context.Context, env *Envelope) (map[string]any, error) {
		sawTask = env.RawInput["task"]
		return map[string]any{"count": 2, "steps": []planStep{
			{Tool: "kv_set", Parameters: map[string]any{"key": "k", "value": 1}},
			{Tool: "kv_get", Parameters: map[string]any{"key": "k"}},
		}}, nil
	}
	hooks := WithHooks("planner", Hooks{Work: plan})
	d, err := Parse("p", []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(d, ".", WithTools(kvTools(t)), hooks)
	if err != nil {
		t.Fatal(err)
	}
	env, err := NewEnvelope("store k")
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Process(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if res.Envelope != env || sawTask != "store k" || stages(res) != "planner:success executor:success" || env.Outputs["execution"]["succeeded"] != 2 {
		t.Fatalf("%s: %v", stages(res), env.Outputs)
	}
	// One stage at a time: the planner, then its routing is in the envelope.
	env, _ = NewEnvelope(map[string]any{"task": "again"})
	res, err = p.ProcessStage(context.Background(), "planner", env)
	if err != nil || stages(res) != "planner:success" || env.Current != "executor" || env.Outputs["plan"]["count"] != float64(2) {
		t.Fatalf("%v: %s current %q plan %v", err, stages(res), env.Current, env.Outputs["plan"])
	}
	res, err = p.Process(context.Background(), env) // goes on where it stopped
	if err != nil || stages(res) != "planner:success executor:success" {
		t.Fatalf("%v: %s", err, stages(res))
	}
	// Bad envelopes are named.
	if _, err := NewEnvelope(42); err == nil {
		t.Error("a number is not raw input")
	}
	if _, err := p.Process(context.Background(), &Envelope{Pipeline: "other"}); !errors.Is(err, ErrWrongPipeline) {
		t.Errorf("another pipeline's envelope: %v", err)
	}
	if _, err := p.ProcessStage(context.Background(), "nope", env); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown stage: %v", err)
	}
	// An envelope at a stage the pipeline lacks (edited, or another
	// pipeline's of the same name) is refused, naming the stage, by
	// Process and by Resume: nothing runs.
	for name, run := range map[string]func(*Envelope) (*Result, error){
		"Process": func(e *Envelope) (*Result, error) { return p.Process(context.Background(), e) },
		"Resume": func(e *Envelope) (*Result, error) {
			e.Pending = &Pending{Stage: e.Current, Outcome: "clarify"}
			return p.Resume(context.Background(), e, "yes")
		},
	} {
		bad, _ := NewEnvelope(map[string]any{"task": "x"})
		bad.Current, bad.Pipeline = "ghost", p.Definition().PipelineName
		if res, err := run(bad); res != nil || !errors.Is(err, ErrWrongPipeline) || !strings.Contains(err.Error(), `"ghost"`) {
			t.Errorf("%s of an envelope at a stage the pipeline lacks: %v, %v", name, res, err)
		}
	}
	// What a mock returns is made JSON values the same way.
	pm, err := New(d, ".", WithTools(kvTools(t)), WithHooks("planner", Hooks{Mock: plan}), WithMock(true))
	if err != nil {
		t.Fatal(err)
	}
	env, _ = NewEnvelope("store k")
	res, err = pm.Process(context.Background(), env)
	if err != nil || stages(res) != "planner:success executor:success" || env.Outputs["execution"]["succeeded"] != 2 {
		t.Fatalf("mock: %v: %s: %v", err, stages(res), env.Outputs)
	}
}

// TestPipelineLogs: a pipeline with a logger logs its start and end, each
// stage's start, end and routing decision, and a hook's failure.
func TestPipelineLogs(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := Parse("p", []byte(abcDef()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(d, ".", WithLogger(l),
		WithHooks("a", Hooks{Work: func(context.Context, *Envelope) (map[string]any, error) {
			return map[string]any{"route": map[string]any{"to": "c"}}, nil
		}}),
		WithHooks("c", Hooks{PostProcess: func(context.Context, *Envelope, map[string]any) error { return errors.New("disk full") }}))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := p.Run(context.Background(), nil)
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r["pipeline"] != "p" || r["run_id"] != res.ID {
			t.Errorf("a record without the run: %s", line)
		}
		s := fmt.Sprint(r["level"], " ", r["msg"], " ", r["stage"])
		if r["route"] != nil {
			s += " " + r["route"].(string)
		}
		lines = append(lines, s)
	}
	want := "INFO pipeline start a|DEBUG stage start a|DEBUG stage end a routing_rules[0] (route.to)|DEBUG stage start c|ERROR stage failed c|ERROR pipeline end <nil>"
	if got := strings.Join(lines, "|"); got != want {
		t.Errorf("records\n%s\nwant\n%s", got, want)
	}
}

// TestDeterministicPipeline: session options with a seed, a clock and a
// trace id make a pipeline run deterministic, its own events included:
// two runs, each kept in a store, give byte-identical Results and event
// streams, and every event carries the trace id.
func TestDeterministicPipeline(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	run := func() ([]byte, []byte) {
		p, err := FromFile("../examples/pipelines/review.json", WithTools(kvTools(t)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var events bytes.Buffer
		res, err := p.Run(context.Background(), map[string]any{"task": "store the release"}, WithStore(st),
			WithSessionOptions(agent.WithSeed(9), agent.WithNow(now), agent.WithTraceContext(trace, "")),
			WithEvents(func(e event.Event) {
				if e.TraceID != trace {
					t.Errorf("event %s of %s has trace id %q", e.Type, e.AgentName, e.TraceID)
				}
				b, _ := json.Marshal(e)
				events.Write(append(b, '\n'))
			}, event.Block()))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		return b, events.Bytes()
	}
	r1, e1 := run()
	r2, e2 := run()
	if !bytes.Equal(r1, r2) {
		t.Errorf("two deterministic Results differ:\n%s\n%s", r1, r2)
	}
	if !bytes.Equal(e1, e2) {
		t.Errorf("two deterministic event streams differ:\n%s\n%s", e1, e2)
	}
}

// TestDriveRefusals: a pipeline run that cannot be driven as asked is
// refused before it starts, naming why, never run another way.
func TestDriveRefusals(t *testing.T) {
	d, _ := Parse("test", []byte(abcDef()))
	turn := 1
	st := teststore.Open(t)
	for _, tc := range []struct {
		name string
		plan drive.Plan
		opts []RunOption
		want string
	}{
		{"an agent run's results", drive.Plan{Dispatch: true, RunID: "run_p1", Driver: "test", Results: map[string]runlog.ToolResult{}}, []RunOption{WithStore(st)}, "drive an agent's run, not a pipeline's"},
		{"an agent run's turns", drive.Plan{RanThrough: &turn}, nil, "drive an agent's run, not a pipeline's"},
		{"an agent run's deadline", drive.Plan{Deadline: time.Now().Add(time.Hour)}, nil, "drive an agent's run, not a pipeline's"},
		{"no store", drive.Plan{Dispatch: true, RunID: "run_p2", Driver: "test"}, nil, "needs a store, a run id and a driver"},
		{"no driver", drive.Plan{Dispatch: true, RunID: "run_p3"}, []RunOption{WithStore(st)}, "needs a store, a run id and a driver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(d, ".")
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Run(context.Background(), nil, append(tc.opts, Drive(tc.plan))...)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}

// TestProcessFinishedEnvelope: an envelope that reached the end is not
// run again from the start: Process refuses it, naming why.
func TestProcessFinishedEnvelope(t *testing.T) {
	d, _ := Parse("test", []byte(abcDef()))
	p, err := New(d, ".", WithMock(true))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), nil)
	if err != nil || res.Envelope.Current != End {
		t.Fatalf("the first run: %v, at %q", err, res.Envelope.Current)
	}
	hops := res.Envelope.HopCount
	if _, err := p.Process(context.Background(), res.Envelope); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the envelope is finished") {
		t.Errorf("Process of a finished envelope: %v", err)
	}
	if res.Envelope.HopCount != hops {
		t.Errorf("the finished envelope ran again: %d hops, was %d", res.Envelope.HopCount, hops)
	}
}
