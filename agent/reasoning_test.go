package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/tool"
)

// kvTools are a read (get, safe) and a write (set, idempotent) of one
// value, for the contradiction rule.
func kvTools(t *testing.T) []tool.Tool {
	var mu sync.Mutex
	value := "one"
	type getArgs struct{}
	type setArgs struct {
		V string `json:"v"`
	}
	get := tool.Must(tool.Func("get", "Read the value.", func(context.Context, getArgs) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		return value, nil
	}, tool.WithIdempotency(tool.Safe)))
	set := tool.Must(tool.Func("set", "Write the value.", func(_ context.Context, in setArgs) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		value = in.V
		return "ok", nil
	}, tool.WithIdempotency(tool.Idempotent), tool.WithExamples(setArgs{V: "two"})))
	return []tool.Tool{get, set}
}

func reactStep(action, input string) reply {
	return answer("Thought: next.\nAction: " + action + "\nAction Input: " + input)
}

// TestContradictions: two reads of the same state with no write between
// that answer differently are a contradiction; a get, set, get is not.
func TestContradictions(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps []reply
		want  int
	}{
		{"get, set, get", []reply{reactStep("get", "{}"), reactStep("set", `{"v": "two"}`), reactStep("get", "{}")}, 0},
		{"get, get unchanged", []reply{reactStep("get", "{}"), reactStep("get", "{}")}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			replies := append(tt.steps, answer("Thought: done.\nFinal Answer: done"))
			a := newTestAgent(t, `{"agent_name": "kv", "version": "v1", "model_name": "m", "mode": "react", "tools": ["get", "set"]}`,
				&recorder{replies: replies}, kvTools(t)...)
			res, err := a.Run(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Confidence < 0.85 { // a contradiction costs 0.1 of the 0.9 a clean run starts at
				t.Errorf("confidence %v: a contradiction was counted", res.Confidence)
			}
		})
	}
	// Two reads that disagree with no write between: a contradiction.
	var n int
	flip := tool.Must(tool.Func("read", "Read.", func(context.Context, struct{}) (int, error) { n++; return n, nil }, tool.WithIdempotency(tool.Safe)))
	a := newTestAgent(t, `{"agent_name": "kv", "version": "v1", "model_name": "m", "mode": "react", "tools": ["read"]}`,
		&recorder{replies: []reply{reactStep("read", "{}"), reactStep("read", "{}"), answer("Thought: done.\nFinal Answer: done")}}, flip)
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Confidence > 0.81 {
		t.Errorf("confidence %v: two disagreeing reads were not a contradiction", res.Confidence)
	}
}

// TestDecisionSaysWhy: the decision line carries the reasoning (first and
// last thoughts) and what the calls found, not only the tools' names.
func TestDecisionSaysWhy(t *testing.T) {
	m := &recorder{replies: []reply{
		answer("Thought: I must read the value first.\nAction: get\nAction Input: {}"),
		answer("Thought: The value is one, so I can answer.\nFinal Answer: one")}}
	a := newTestAgent(t, `{"agent_name": "kv", "version": "v1", "model_name": "m", "mode": "react", "tools": ["get", "set"]}`, m, kvTools(t)...)
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Called get", `reasoning: "I must read the value first." … "The value is one, so I can answer."`, `found: get → "one"`, "answered: one"} {
		if !strings.Contains(res.Decision, want) {
			t.Errorf("decision %q lacks %q", res.Decision, want)
		}
	}
}

// TestEmptyThoughtKeepsItsStep: a tool call the model made without a
// word keeps its step, with an empty thought.
func TestEmptyThoughtKeepsItsStep(t *testing.T) {
	m := &recorder{replies: []reply{calls(call("1", "get", `{}`)), answer("one")}}
	a := newTestAgent(t, `{"agent_name": "kv", "version": "v1", "model_name": "m", "tools": ["get", "set"]}`, m, kvTools(t)...)
	res, err := a.Run(context.Background(), nil)
	if err != nil || len(res.Steps) != 1 || res.Steps[0].Thought != "" || res.Steps[0].Action == nil || res.Steps[0].Observation != `"one"` {
		t.Fatalf("%v: steps %+v", err, res.Steps)
	}
}

type panicky struct{}

func (panicky) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	panic("the provider broke holding sk-proj-CANARYpanic00000000000000007")
}

type panickyPlanner struct{}

func (panickyPlanner) Next(context.Context, *Turn) (Decision, error) { panic("the planner broke") }

// TestPanicStackInDetails: a run that fails because a provider or a
// planner panicked says where in error.details.stack, redacted.
func TestPanicStackInDetails(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"provider", []Option{WithProvider(panicky{}, "broken")}},
		{"planner", []Option{WithProvider(&recorder{}, "test"), WithPlanner(panickyPlanner{})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(mustSpec(t, `{"agent_name": "p", "version": "v1", "model_name": "m", "retry": {"max_retries": 0}}`), tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Run(context.Background(), nil)
			if err == nil || res.Error == nil {
				t.Fatalf("%v %+v", err, res)
			}
			stack, _ := res.Error.Details["stack"].(string)
			if !strings.Contains(stack, "goroutine") || !strings.Contains(stack, ".go:") {
				t.Errorf("details %v have no stack", res.Error.Details)
			}
			b, _ := json.Marshal(res)
			if strings.Contains(string(b), "CANARY") {
				t.Error("the panic's secret is in the Result")
			}
		})
	}
}

// TestToolExamples: a tool's examples are shown with its description to
// native tool calling and in the ReAct prompt; an example that does not
// fit the schema is refused; few_shot_enabled false leaves the few-shot
// examples out.
func TestToolExamples(t *testing.T) {
	m := &recorder{replies: []reply{answer("done")}}
	a := newTestAgent(t, `{"agent_name": "kv", "version": "v1", "model_name": "m", "tools": ["get", "set"]}`, m, kvTools(t)...)
	if _, err := a.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var desc string
	for _, ts := range m.reqs[0].Tools {
		if ts.Name == "set" {
			desc = ts.Description
		}
	}
	if desc != "Write the value.\nExample arguments: {\"v\":\"two\"}" {
		t.Errorf("set's description %q", desc)
	}
	for _, on := range []string{"true", "false"} {
		m := &recorder{replies: []reply{answer("Thought: done.\nFinal Answer: done")}}
		a := newTestAgent(t, `{"agent_name": "kv", "version": "v1", "model_name": "m", "mode": "react", "tools": ["get", "set"],
			"few_shot": ["Task: say hi\nThought: easy.\nFinal Answer: hi"], "few_shot_enabled": `+on+`}`, m, kvTools(t)...)
		if _, err := a.Run(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		system := m.reqs[0].Messages[0].Content
		if !strings.Contains(system, "- set: Write the value.\n  Example arguments: {\"v\":\"two\"}\n  Parameters:") {
			t.Errorf("the ReAct prompt lacks the tool's example, indented under it:\n%s", system)
		}
		if strings.Contains(system, "say hi") != (on == "true") {
			t.Errorf("few_shot_enabled %s: the few-shot example shown is %v", on, strings.Contains(system, "say hi"))
		}
	}
	type args struct {
		N int `json:"n"`
	}
	_, err := tool.Func("bad", "", func(context.Context, args) (int, error) { return 0, nil }, tool.WithExamples(map[string]any{"n": "three"}))
	if err == nil || !strings.Contains(err.Error(), "examples[0]") {
		t.Errorf("an example that does not fit the schema: %v", err)
	}
}
