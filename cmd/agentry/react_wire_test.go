package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/wiretest"
)

// TestReActOnEachVendor: a ReAct agent runs through each vendor's wire
// format (the bodies its API answers with) on replies with the quirks
// real models show (../../react/testdata/replies): the tool is called
// with its input, and the Final Answer is the result. The live test
// (TestLiveReAct) runs the same against the vendors themselves.
func TestReActOnEachVendor(t *testing.T) {
	reply := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", "react", "testdata", "replies", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, v := range []struct {
		vendor, env, model, quirk string
		body                      func(text string) string
	}{
		{"openai", "OPENAI_API_KEY", "openai:gpt-4.1-mini", "markdown-labels.txt", func(text string) string {
			return `{"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4.1-mini", "choices": [{"index": 0, "finish_reason": "stop",
				"message": {"role": "assistant", "content": ` + quote(text) + `}}], "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}}`
		}},
		{"anthropic", "ANTHROPIC_API_KEY", "anthropic:claude-haiku-4-5", "extra-prose.txt", func(text string) string {
			return `{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", "stop_reason": "end_turn",
				"content": [{"type": "text", "text": ` + quote(text) + `}], "usage": {"input_tokens": 50, "output_tokens": 20}}`
		}},
		{"gemini", "GEMINI_API_KEY", "gemini:gemini-2.5-flash", "fenced-json.txt", func(text string) string {
			return `{"candidates": [{"content": {"role": "model", "parts": [{"text": ` + quote(text) + `}]}, "finishReason": "STOP"}],
				"usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 20, "totalTokenCount": 70}, "modelVersion": "gemini-2.5-flash"}`
		}},
	} {
		t.Run(v.vendor, func(t *testing.T) {
			t.Setenv(v.env, "test-key-abcdefghijklmnopqrstuvwxyz0123")
			srv := wiretest.New(t, wiretest.Reply{Body: v.body(reply(v.quirk))}, wiretest.Reply{Body: v.body(reply("final-prose.txt"))})
			spec := filepath.Join(t.TempDir(), "agent.json")
			os.WriteFile(spec, []byte(`{"agent_name": "summer", "version": "v1", "mode": "react", "model_name": "`+v.model+`", "base_url": "`+srv.URL+`",
				"system_text": "You keep sums.", "user_text": "Save the sum of 2 and 3.", "tools": ["kv_set"]}`), 0o600)
			code, out, errs := run(t, "run", spec, "--no-store", "-q", "--json")
			var res struct {
				Result any `json:"result"`
				Steps  []struct {
					Thought string `json:"thought"`
					Action  *struct {
						Tool  string          `json:"tool"`
						Input json.RawMessage `json:"input"`
						Error string          `json:"error"`
					} `json:"action"`
				} `json:"steps"`
			}
			json.Unmarshal([]byte(out), &res)
			if code != 0 || res.Result != "The sum is 5." || len(res.Steps) == 0 || res.Steps[0].Action == nil {
				t.Fatalf("exit %d, result %v\n%s\n%s", code, res.Result, out, errs)
			}
			a := res.Steps[0].Action
			if a.Tool != "kv_set" || a.Error != "" || !strings.Contains(strings.ReplaceAll(string(a.Input), " ", ""), `"value":5`) {
				t.Errorf("the call: %+v", a)
			}
			if len(srv.Requests()) != 2 {
				t.Errorf("%d requests to %s, want 2", len(srv.Requests()), v.vendor)
			}
		})
	}
}

// TestReActFinalAnswerThroughTheBinary: run --json gives a ReAct Final
// Answer that is a JSON array as the array, and every step its thought,
// an empty one where the model gave none.
func TestReActFinalAnswerThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "turns.json"), []byte(`{"turns": [
		{"content": "Action: kv_set\nAction Input: {\"key\": \"n\", \"value\": 2}"},
		{"content": "Thought: Both are saved.\nFinal Answer: [1, 2]"}]}`), 0o600)
	spec := filepath.Join(dir, "agent.json")
	os.WriteFile(spec, []byte(`{"agent_name": "lister", "version": "v1", "mode": "react", "model_name": "scripted:turns.json",
		"system_text": "You list.", "user_text": "List them.", "tools": ["kv_set"]}`), 0o600)
	code, out, errs := run(t, "run", spec, "--no-store", "-q", "--json")
	var res struct {
		Result any              `json:"result"`
		Steps  []map[string]any `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, errs)
	}
	if list, ok := res.Result.([]any); !ok || len(list) != 2 {
		t.Errorf("the result %#v, want the array [1, 2]", res.Result)
	}
	for i, s := range res.Steps {
		if _, ok := s["thought"]; !ok {
			t.Errorf("step %d has no thought: %v", i+1, s)
		}
	}
	if len(res.Steps) != 2 || res.Steps[0]["thought"] != "" || res.Steps[1]["thought"] != "Both are saved." {
		t.Errorf("the steps' thoughts: %v", res.Steps)
	}
}
