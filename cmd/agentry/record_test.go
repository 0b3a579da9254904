package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry/agentry/internal/wiretest"
)

// TestRecordThenReplay runs an agent against OpenAI's wire format (a local
// server replaying documented responses, a rate limit first), records it,
// and replays the recording offline: same answer, same steps, same cost.
func TestRecordThenReplay(t *testing.T) {
	const key = "sk-test-abcdefghijklmnopqrstuvwxyz0123"
	t.Setenv("OPENAI_API_KEY", key)
	srv := wiretest.New(t,
		wiretest.Reply{Status: 429, Headers: map[string]string{"Retry-After-Ms": "5"},
			Body: `{"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}`},
		wiretest.Reply{Body: `{"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4.1-mini-2025-04-14",
			"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
			"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "kv_set", "arguments": "{\"key\":\"k\",\"value\":42}"}}]}}],
			"usage": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290, "prompt_tokens_details": {"cached_tokens": 1024}}}`},
		wiretest.Reply{Body: `{"id": "c2", "object": "chat.completion", "created": 2, "model": "gpt-4.1-mini-2025-04-14",
			"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Stored 42 under k."}}],
			"usage": {"prompt_tokens": 1300, "completion_tokens": 9, "total_tokens": 1309, "prompt_tokens_details": {"cached_tokens": 1280}}}`},
	)
	dir := t.TempDir()
	spec := filepath.Join(dir, "agent.json")
	os.WriteFile(spec, []byte(`{"agent_name": "store", "version": "v1", "model_name": "gpt-4.1-mini", "base_url": "`+srv.URL+`",
		"system_text": "Store numbers.", "tools": ["kv_set"], "retry": {"attempts": 3, "initial_backoff_ms": 1}}`), 0o600)
	rec := filepath.Join(dir, "recorded.json")

	code, live, errs := run(t, "run", spec, "--json", "-q", "--record", rec)
	if code != 0 {
		t.Fatalf("live run: exit %d\n%s\n%s", code, errs, live)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("the server saw %d requests", n)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), key) {
		t.Fatal("the recording holds the API key")
	}

	code, replay, errs := run(t, "run", spec, "--json", "-q", "--model", "scripted:"+rec)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, errs)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("the replay called the server (%d requests)", n)
	}
	type result struct {
		Result     string  `json:"result"`
		Cost       float64 `json:"estimated_cost_usd"`
		Model      string  `json:"model"`
		Iterations int     `json:"iterations"`
		Usage      struct {
			Total int `json:"total_tokens"`
		} `json:"token_usage"`
		Steps []struct {
			Observation string `json:"observation"`
		} `json:"steps"`
		ModelCalls []struct {
			Attempts int `json:"attempts"`
		} `json:"model_calls"`
	}
	var a, b result
	json.Unmarshal([]byte(live), &a)
	json.Unmarshal([]byte(replay), &b)
	// 210 uncached + 1024 cached + 56 out, then 20 + 1280 + 9, at gpt-4.1-mini prices.
	want := (210*0.40 + 1024*0.10 + 56*1.60 + 20*0.40 + 1280*0.10 + 9*1.60) / 1e6
	if a.Cost < want-1e-12 || a.Cost > want+1e-12 {
		t.Errorf("live cost %v, want %v", a.Cost, want)
	}
	if a.Result != "Stored 42 under k." || a.Result != b.Result || a.Cost != b.Cost || a.Model != b.Model || a.Usage != b.Usage ||
		a.Iterations != b.Iterations || len(b.Steps) != 1 || a.Steps[0].Observation != b.Steps[0].Observation {
		t.Errorf("live %+v\nreplay %+v", a, b)
	}
	if a.ModelCalls[0].Attempts != 2 || b.ModelCalls[0].Attempts != 2 {
		t.Errorf("attempts live %+v replay %+v: the rate limit must replay", a.ModelCalls, b.ModelCalls)
	}
}
