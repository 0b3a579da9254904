package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/prompt"
	"github.com/agentry/agentry/tool"
)

const reactSpec = `"agent_name": "solver", "version": "v1", "model_name": "m", "mode": "react",
	"description": "a careful calculator", "purpose_text": "add numbers for ${who}", "input_keys": ["who"], "tools": ["add"]`

func TestReActLoop(t *testing.T) {
	m := &recorder{replies: []reply{
		answer("Thought: I need the sum.\nAction: add\nAction Input: {\"a\": 2, \"b\": 3}"),
		answer("The sum is five, I think."),
		answer("Thought: I have the sum.\nFinal Answer: 5"),
	}}
	a := newTestAgent(t, `{`+reactSpec+`}`, m)
	res, err := a.Run(context.Background(), map[string]any{"who": "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if _, text := res.Result.(string); text || fmt.Sprint(res.Result) != "5" || res.Iterations != 3 || len(res.Steps) != 3 || res.PromptTemplate != "react/v1" {
		t.Fatalf("result %+v", res)
	}
	s := res.Steps
	if s[0].Thought != "I need the sum." || s[0].Action.Tool != "add" || s[0].Observation != "5" {
		t.Errorf("step 1 %+v", s[0])
	}
	if !strings.Contains(s[1].ParseError, "no Thought, Action or Final Answer") || s[1].Action != nil || s[1].Thought != "The sum is five, I think." {
		t.Errorf("step 2 %+v", s[1])
	}
	if s[2].FinalAnswer != "5" || s[2].Thought != "I have the sum." {
		t.Errorf("step 3 %+v", s[2])
	}
	req := m.reqs[0]
	sys := req.Messages[0].Content
	for _, want := range []string{"You are a careful calculator. Your capabilities: add numbers for Ada", "- add: Add two integers.",
		`Parameters: {"additionalProperties":false`, "Action Input: {json_input}", "At most 10 steps.", `Current Task: who = "Ada"`} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	if len(req.Tools) != 0 || len(req.Stop) == 0 {
		t.Errorf("a ReAct request has native tools %v or no stop sequence %v", req.Tools, req.Stop)
	}
	obs := m.reqs[1].Messages[len(m.reqs[1].Messages)-1]
	if obs.Role != llm.RoleUser || obs.Content != "Observation: 5" {
		t.Errorf("observation %+v", obs)
	}
	fix := m.reqs[2].Messages[len(m.reqs[2].Messages)-1].Content
	if !strings.HasPrefix(fix, "Observation: Your reply could not be used: the reply has no Thought") {
		t.Errorf("parse-error observation %q", fix)
	}
	if res.Metrics.ParseErrors != 1 || res.Confidence != 0.8 || !strings.Contains(res.Decision, "1 unusable replies") {
		t.Errorf("parse errors %d confidence %v decision %q", res.Metrics.ParseErrors, res.Confidence, res.Decision)
	}
}

func TestReActHintsAndCache(t *testing.T) {
	var calls atomic.Int32
	lookup := tool.Must(tool.Func("lookup", "Look a fact up.", func(_ context.Context, in echoArgs) (json.RawMessage, error) {
		calls.Add(1)
		return json.RawMessage(`{"fact": "` + in.Text + ` is 42", "agent_hints": {"source_quality": "low", "validity_period": "5m",
			"risk_factors": ["unverified"], "suggested_next_actions": ["cross-check"],
			"alternatives": [{"approach": "ask a human", "confidence": 0.6}]}}`), nil
	}, tool.WithIdempotency(tool.Safe)))
	act := "Thought: Assuming the source is current. Look it up.\nAction: lookup\nAction Input: {\"text\": \"x\"}"
	m := &recorder{replies: []reply{answer(act), answer(act), answer("Thought: done\nFinal Answer: 42")}}
	a := newTestAgent(t, `{"agent_name": "facts", "version": "v1", "model_name": "m", "mode": "react", "tools": ["lookup"]}`, m, lookup)
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || !res.Steps[1].Action.Cached || res.Steps[0].Action.Cached {
		t.Errorf("tool ran %d times; cached flags %v %v", calls.Load(), res.Steps[0].Action.Cached, res.Steps[1].Action.Cached)
	}
	obs := m.reqs[1].Messages[len(m.reqs[1].Messages)-1].Content
	for _, want := range []string{"Hints: source quality low", "valid for 5m0s", "risks: unverified", "suggested next: cross-check"} {
		if !strings.Contains(obs, want) {
			t.Errorf("observation lacks %q: %s", want, obs)
		}
	}
	// The cached answer brings its hints again, not its alternatives twice.
	if res.SourceQuality != "low" || len(res.Alternatives) != 1 || res.Alternatives[0].Approach != "ask a human" ||
		len(res.AssumptionsMade) != 1 || !strings.HasPrefix(res.AssumptionsMade[0], "Assuming the source is current.") {
		t.Errorf("reasoning: quality %q alternatives %+v assumptions %q", res.SourceQuality, res.Alternatives, res.AssumptionsMade)
	}
	// 0.9 - 0.05 (one risk) - 0.15 (low source quality) = 0.70
	if res.Confidence != 0.7 || strings.Join(res.ContextUsed, ",") != "tool:lookup" {
		t.Errorf("confidence %v context %v", res.Confidence, res.ContextUsed)
	}
}

func TestReActStructuredFinalAnswer(t *testing.T) {
	m := &recorder{replies: []reply{
		answer("Thought: t\nFinal Answer: {\"next\": 7}"),
		answer("Thought: t\nFinal Answer: ```json\n{\"next\": \"card_7\", \"confidence\": 0.5}\n```"),
	}}
	a := newTestAgent(t, `{"agent_name": "cards", "version": "v1", "model_name": "m", "mode": "react",
		"output_schema": {"type": "object", "required": ["next"], "properties": {"next": {"type": "string"}, "confidence": {"type": "number"}}}}`, m)
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := res.Result.(map[string]any)
	if out["next"] != "card_7" || res.Validated == nil || !*res.Validated {
		t.Fatalf("%+v", res)
	}
	fix := m.reqs[1].Messages[len(m.reqs[1].Messages)-1].Content
	if !strings.HasPrefix(fix, "Observation: Your reply does not match the required JSON schema") || !strings.Contains(fix, "next: got number, want string") {
		t.Errorf("correction %q", fix)
	}
	if !strings.Contains(m.reqs[0].Messages[0].Content, `must be a single JSON object matching this JSON schema`) {
		t.Error("schema not in the ReAct prompt")
	}
	// (0.9 for 2 turns + 0.5 from the model) / 2
	if res.Confidence != 0.7 {
		t.Errorf("confidence %v", res.Confidence)
	}
}

func TestReActNeverUsable(t *testing.T) {
	m := &recorder{replies: []reply{answer("hmm"), answer("still thinking"), answer("Thought: more thinking")}}
	a := newTestAgent(t, `{"agent_name": "lost", "version": "v1", "model_name": "m", "mode": "react", "limits": {"max_turns": 3}}`, m)
	res, err := a.Run(context.Background(), nil)
	if !errors.Is(err, ErrMaxTurns) || res.Metrics.ParseErrors != 3 || len(res.Steps) != 3 {
		t.Errorf("%v %+v", err, res.Metrics)
	}
}

func TestStructuredModes(t *testing.T) {
	for _, mode := range []string{"chooser", "writer", "extractor"} {
		t.Run(mode, func(t *testing.T) {
			m := &recorder{replies: []reply{answer("```json\n{\"tone\": \"formal\"}\n```")}}
			spec := `{"agent_name": "labels", "version": "v3", "model_name": "m", "mode": "` + mode + `",
				"system_text": "You label ${kind}.", "purpose_text": "Pick a tone.", "input_keys": ["kind", "text"],
				"output_schema": {"type": "object", "required": ["tone", "depth"], "properties": {
					"tone": {"type": "string", "enum": ["direct", "formal"]}, "depth": {"type": "string", "enum": ["short", "long"]}}},
				"enums": {"tone": ["direct", "formal"], "depth": ["short", "long"]}, "defaults": {"depth": "short"}}`
			a := newTestAgent(t, spec, m)
			input := map[string]any{"kind": "emails", "text": "Dear team"}
			res, err := a.Run(context.Background(), input)
			if err != nil {
				t.Fatal(err)
			}
			out := res.Result.(map[string]any)
			if out["tone"] != "formal" || out["depth"] != "short" || res.Iterations != 1 || !*res.Validated {
				t.Errorf("result %+v", res)
			}
			if tp := m.reqs[0].Temperature; tp == nil || *tp != 0 {
				t.Errorf("temperature %v: the structured modes default to 0", tp)
			}
			p, _ := prompt.New(prompt.Config{AgentName: "labels", Version: "v3", Mode: mode, SystemText: "You label ${kind}.",
				PurposeText: "Pick a tone.", OutputSchema: a.Spec().OutputSchema, Enums: a.Spec().Enums, InputKeys: []string{"kind", "text"}})
			want, _, _ := p.Compose(input)
			req := m.reqs[0]
			if len(req.Messages) != 2 || req.Messages[0].Content != want[0].Content || req.Messages[1].Content != want[1].Content {
				t.Errorf("sent %+v\nwant %+v", req.Messages, want)
			}
			if len(req.Tools) != 0 || len(req.ResponseSchema) == 0 || !strings.Contains(req.Messages[0].Content, "You label emails.") {
				t.Errorf("request %+v", req)
			}
		})
	}
}

// A tool's hints that carry a secret reach the model as the tool wrote
// them, and the Result (its steps' hints and its alternatives) redacted.
func TestHintsAreRedacted(t *testing.T) {
	const key = "sk-proj-CANARYhintsSecret000000001"
	lookup := tool.Must(tool.Func("lookup", "Look a fact up.", func(context.Context, echoArgs) (json.RawMessage, error) {
		return json.RawMessage(`{"fact": 42, "agent_hints": {"risk_factors": ["the key ` + key + ` leaked"],
			"dependencies": ["` + key + `"], "suggested_next_actions": ["rotate ` + key + `"],
			"alternatives": [{"approach": "use ` + key + `", "confidence": 0.6, "reasoning": "` + key + `", "pros": ["` + key + `"], "cons": ["` + key + `"]}]}}`), nil
	}, tool.WithIdempotency(tool.Safe)))
	act := "Thought: Look it up.\nAction: lookup\nAction Input: {\"text\": \"x\"}"
	m := &recorder{replies: []reply{answer(act), answer("Thought: done\nFinal Answer: 42")}}
	a := newTestAgent(t, `{"agent_name": "facts", "version": "v1", "model_name": "m", "mode": "react", "tools": ["lookup"]}`, m, lookup)
	res, err := a.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := res.Steps[0].Action.Hints; h == nil || len(h.RiskFactors) != 1 || len(res.Alternatives) != 1 {
		t.Fatalf("hints %+v alternatives %+v", h, res.Alternatives)
	}
	got := fmt.Sprintf("%+v %+v", *res.Steps[0].Action.Hints, res.Alternatives)
	if strings.Contains(got, key) || !strings.Contains(got, "[REDACTED:secret]") {
		t.Errorf("the Result's hints and alternatives: %s", got)
	}
	if obs := m.reqs[1].Messages[len(m.reqs[1].Messages)-1].Content; !strings.Contains(obs, key) {
		t.Errorf("the model did not see the tool's hints as written: %s", obs)
	}
}

// TestReActFinalAnswerJSON: a Final Answer is the result as JSON when it
// is JSON, whatever its kind; otherwise its text.
func TestReActFinalAnswerJSON(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string // want: the result as JSON
	}{
		{"an array", "[1, 2]", `[1,2]`},
		{"a number", "42.5", `42.5`},
		{"a boolean", "true", `true`},
		{"a quoted string", `"done"`, `"done"`},
		{"an object", `{"a": 1}`, `{"a":1}`},
		{"a fenced array", "```json\n[\"x\"]\n```", `["x"]`},
		{"prose", "It is 42.", `"It is 42."`},
		{"prose that starts like JSON", "[1, 2] are the two", `"[1, 2] are the two"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &recorder{replies: []reply{answer("Thought: done.\nFinal Answer: " + tc.answer)}}
			res, err := newTestAgent(t, `{`+reactSpec+`}`, m).Run(context.Background(), map[string]any{"who": "Ada"})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(res.Result); string(got) != tc.want {
				t.Errorf("result %s, want %s", got, tc.want)
			}
			if s := res.Steps[len(res.Steps)-1]; s.Thought != "done." {
				t.Errorf("the last step's thought %q", s.Thought)
			}
		})
	}
}

// TestStepThoughtAlwaysPresent: the Noema spec requires a thought on
// every step; one the model did not give is present and empty.
func TestStepThoughtAlwaysPresent(t *testing.T) {
	b, err := json.Marshal(Step{Step: 1, Turn: 1, Action: &Action{Tool: "add"}})
	if err != nil || !strings.Contains(string(b), `"thought":""`) {
		t.Errorf("a step without a thought: %s, %v", b, err)
	}
}
