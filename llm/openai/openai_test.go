package openai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/wiretest"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/retry"
)

func ptr[T any](v T) *T { return &v }

func toolRequest(model string) *llm.Request {
	return &llm.Request{
		Model: model,
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are a release assistant."},
			{Role: llm.RoleUser, Content: "What changed in x 2.0?"},
			{Role: llm.RoleAssistant, Content: "Let me look.", ToolCalls: []llm.ToolCall{
				{ID: "call_a", Name: "http_get", Arguments: json.RawMessage(`{"url":"https://x.dev/releases/2.0"}`)},
				{ID: "call_b", Name: "kv_get", Arguments: json.RawMessage(`{"key":"x"}`)},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_a", Name: "http_get", Content: `{"status":200,"body":"notes"}`},
			{Role: llm.RoleTool, ToolCallID: "call_b", Name: "kv_get", Content: `{"status":"error","error":{"type":"not_found"}}`},
		},
		Tools: []llm.ToolSpec{
			{Name: "http_get", Description: "Fetch a URL.", Parameters: json.RawMessage(
				`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"url":{"type":"string"},"headers":{"type":["object","null"],"additionalProperties":{"type":"string"}}},"required":["url"],"additionalProperties":false}`)},
			{Name: "kv_get", Description: "Read a key.", Parameters: json.RawMessage(
				`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"],"additionalProperties":false}`)},
		},
		Temperature:     ptr(0.2),
		TopP:            ptr(0.9),
		MaxOutputTokens: 300,
		ToolChoice:      "required",
	}
}

const toolReply = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1741569952, "model": "gpt-4.1-mini-2025-04-14",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
    "message": {"role": "assistant", "content": null, "refusal": null, "annotations": [],
      "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "http_get", "arguments": "{\"url\":\"https://x.dev/a\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "kv_get", "arguments": "{\"key\":\"y\"}"}}]}}],
  "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
  "service_tier": "default", "system_fingerprint": "fp_1"
}`

const wantToolRequest = `{
  "model": "gpt-4.1-mini",
  "messages": [
    {"role": "system", "content": "You are a release assistant."},
    {"role": "user", "content": "What changed in x 2.0?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
      {"id": "call_a", "type": "function", "function": {"name": "http_get", "arguments": "{\"url\":\"https://x.dev/releases/2.0\"}"}},
      {"id": "call_b", "type": "function", "function": {"name": "kv_get", "arguments": "{\"key\":\"x\"}"}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "{\"status\":200,\"body\":\"notes\"}"},
    {"role": "tool", "tool_call_id": "call_b", "content": "{\"status\":\"error\",\"error\":{\"type\":\"not_found\"}}"}
  ],
  "tools": [
    {"type": "function", "function": {"name": "http_get", "description": "Fetch a URL.",
      "parameters": {"type": "object", "properties": {"url": {"type": "string"}, "headers": {"type": ["object", "null"], "additionalProperties": {"type": "string"}}},
        "required": ["url"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "kv_get", "description": "Read a key.", "strict": true,
      "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"], "additionalProperties": false}}}
  ],
  "tool_choice": "required",
  "temperature": 0.2,
  "top_p": 0.9,
  "max_completion_tokens": 300
}`

func TestGenerateWithTools(t *testing.T) {
	f := newServer(t, wiretest.Reply{Body: toolReply})
	p := New(Options{APIKey: "sk-test-secret", BaseURL: f.URL})
	resp, err := p.Generate(context.Background(), toolRequest("gpt-4.1-mini"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Method != "POST" || reqs[0].Path != "/chat/completions" {
		t.Fatalf("requests %+v", reqs)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test-secret" {
		t.Errorf("Authorization %q", got)
	}
	wiretest.JSONEqual(t, reqs[0].Body, wantToolRequest)
	checkOpenAPI(t, reqs[0].Body)

	if len(resp.ToolCalls) != 2 || resp.ToolCalls[1].ID != "call_2" || resp.ToolCalls[1].Name != "kv_get" || string(resp.ToolCalls[1].Arguments) != `{"key":"y"}` {
		t.Errorf("tool calls %+v", resp.ToolCalls)
	}
	want := llm.Usage{PromptTokens: 1200, CompletionTokens: 40, TotalTokens: 1240, CachedPromptTokens: 1024}
	if resp.Usage != want || resp.Model != "gpt-4.1-mini-2025-04-14" || resp.FinishReason != "tool_calls" {
		t.Errorf("usage %+v model %q finish %q", resp.Usage, resp.Model, resp.FinishReason)
	}
	// Priced to the cent with the cached tokens: 176 x $0.40 + 1024 x $0.10 + 40 x $1.60 per million.
	cost, _ := llm.DefaultPricing().Cost(resp.Model, resp.Usage)
	if want := (176*0.40 + 1024*0.10 + 40*1.60) / 1e6; cost < want-1e-12 || cost > want+1e-12 {
		t.Errorf("cost %v, want %v", cost, want)
	}
}

func TestReasoningModelAndStructuredOutput(t *testing.T) {
	f := newServer(t, wiretest.Reply{Body: `{"id": "c", "object": "chat.completion", "created": 1, "model": "o3-2025-04-16",
		"choices": [{"index": 0, "finish_reason": "stop", "logprobs": null, "message": {"role": "assistant", "content": "{\"tone\":\"direct\"}", "refusal": null}}],
		"usage": {"prompt_tokens": 10, "completion_tokens": 300, "total_tokens": 310, "completion_tokens_details": {"reasoning_tokens": 290}}}`})
	p := New(Options{APIKey: "k", BaseURL: f.URL})
	resp, err := p.Generate(context.Background(), &llm.Request{
		Model:           "o3",
		Messages:        []llm.Message{{Role: llm.RoleSystem, Content: "Label it."}, {Role: llm.RoleUser, Content: "text"}},
		Temperature:     ptr(0.0),
		MaxOutputTokens: 2000,
		ResponseSchema:  json.RawMessage(`{"type":"object","properties":{"tone":{"type":"string","enum":["direct","formal"]}},"required":["tone"],"additionalProperties":false}`),
	})
	if err != nil || resp.Content != `{"tone":"direct"}` {
		t.Fatalf("%+v %v", resp, err)
	}
	body := f.Requests()[0].Body
	wiretest.JSONEqual(t, body, `{
	  "model": "o3",
	  "messages": [{"role": "developer", "content": "Label it."}, {"role": "user", "content": "text"}],
	  "max_completion_tokens": 2000,
	  "response_format": {"type": "json_schema", "json_schema": {"name": "output", "strict": true,
	    "schema": {"type": "object", "properties": {"tone": {"type": "string", "enum": ["direct", "formal"]}}, "required": ["tone"], "additionalProperties": false}}}
	}`)
	checkOpenAPI(t, body)
}

func TestCompatibleServer(t *testing.T) {
	f := newServer(t, wiretest.Reply{Body: `{"id": "c", "object": "chat.completion", "created": 1, "model": "qwen3",
		"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
		"usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}`})
	m, err := llm.Open("ollama:qwen3", llm.Config{BaseURL: f.URL})
	if err != nil || m.ProviderName != "ollama" || m.ID != "qwen3" || m.Capabilities != (llm.Capabilities{Unknown: true}) {
		t.Fatalf("%v %+v", err, m)
	}
	p, model := m.Provider, m.ID
	resp, err := p.Generate(context.Background(), &llm.Request{Model: model, MaxOutputTokens: 64, Temperature: ptr(0.7),
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}, Stop: []string{"\nObservation:"}})
	if err != nil || resp.Content != "hi" {
		t.Fatalf("%+v %v", resp, err)
	}
	body := f.Requests()[0].Body
	wiretest.JSONEqual(t, body, `{"model": "qwen3", "messages": [{"role": "user", "content": "hello"}], "temperature": 0.7, "max_tokens": 64, "stop": ["\nObservation:"]}`)
	checkOpenAPI(t, body)
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name      string
		reply     wiretest.Reply
		kind      llm.Kind
		retry     time.Duration
		inMessage string
	}{
		{"rate limited", wiretest.Reply{Status: 429, Headers: map[string]string{"Retry-After": "2"},
			Body: `{"error": {"message": "Rate limit reached for gpt-4.1-mini on tokens per min.", "type": "tokens", "param": null, "code": "rate_limit_exceeded"}}`},
			llm.KindRateLimited, 2 * time.Second, "Rate limit reached"},
		{"retry-after-ms", wiretest.Reply{Status: 429, Headers: map[string]string{"Retry-After-Ms": "150"},
			Body: `{"error": {"message": "slow down", "type": "requests", "param": null, "code": null}}`}, llm.KindRateLimited, 150 * time.Millisecond, "slow down"},
		{"auth", wiretest.Reply{Status: 401, Body: `{"error": {"message": "Incorrect API key provided: sk-test-*****cret.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}`},
			llm.KindAuth, 0, "Incorrect API key"},
		{"context", wiretest.Reply{Status: 400, Body: `{"error": {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}`},
			llm.KindContextTooLong, 0, "maximum context length"},
		{"not found", wiretest.Reply{Status: 404, Body: `{"error": {"message": "The model 'gpt-9' does not exist", "type": "invalid_request_error", "param": null, "code": "model_not_found"}}`},
			llm.KindNotFound, 0, "does not exist"},
		{"quota", wiretest.Reply{Status: 429, Body: `{"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}`},
			llm.KindAuth, 0, "quota"},
		{"server", wiretest.Reply{Status: 500, Body: `{"error": {"message": "The server had an error.", "type": "server_error", "param": null, "code": null}}`},
			llm.KindTransient, 0, "server had an error"},
		{"overloaded", wiretest.Reply{Status: 503, Body: `{"error": {"message": "The engine is currently overloaded.", "type": "server_error", "param": null, "code": null}}`},
			llm.KindOverloaded, 0, "overloaded"},
		{"bad request", wiretest.Reply{Status: 400, Body: `{"error": {"message": "Invalid value for 'temperature'.", "type": "invalid_request_error", "param": "temperature", "code": "invalid_value"}}`},
			llm.KindInvalidRequest, 0, "temperature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newServer(t, tt.reply)
			p := New(Options{APIKey: "sk-test-secret", BaseURL: f.URL})
			_, err := p.Generate(context.Background(), &llm.Request{Model: "gpt-4.1-mini", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v", err)
			}
			if ae.Kind != tt.kind || ae.RetryAfter != tt.retry || ae.Status != tt.reply.Status {
				t.Errorf("kind %v retry %v status %d", ae.Kind, ae.RetryAfter, ae.Status)
			}
			msg := err.Error()
			for _, want := range []string{"openai", "gpt-4.1-mini", tt.inMessage} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
			if strings.Contains(msg, "sk-test-secret") {
				t.Errorf("message leaks the key: %q", msg)
			}
		})
	}
}

func TestNoDoubleRetries(t *testing.T) {
	fail := wiretest.Reply{Status: 500, Body: `{"error": {"message": "boom", "type": "server_error", "param": null, "code": null}}`}
	f := newServer(t, fail, fail, fail)
	p := llm.Retry(retry.Policy{Attempts: 2, InitialBackoff: time.Millisecond})(New(Options{APIKey: "k", BaseURL: f.URL}))
	_, err := p.Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
	if !errors.Is(err, llm.ErrTransient) {
		t.Fatalf("err = %v", err)
	}
	if n := len(f.Requests()); n != 2 {
		t.Errorf("server saw %d requests for 2 attempts: the SDK retried on its own", n)
	}
}

func TestNoKey(t *testing.T) {
	f := newServer(t)
	t.Setenv("OPENAI_API_KEY", "")
	p := New(Options{BaseURL: f.URL})
	_, err := p.Generate(context.Background(), &llm.Request{Model: "gpt-4.1", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "OPENAI_API_KEY") || len(f.Requests()) != 0 {
		t.Errorf("err = %v after %d requests", err, len(f.Requests()))
	}
}

var streamEvents = []string{
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"content":"Checking "},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"content":"both."},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"kv_get","arguments":""}}]},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ke"}}]},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_y","type":"function","function":{"name":"kv_list","arguments":"{}"}}]},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"y\":\"a\"}"}}]},"finish_reason":null}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-2025-04-14","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`[DONE]`,
}

func TestStream(t *testing.T) {
	f := newServer(t, wiretest.Reply{SSE: wiretest.Data(streamEvents...)})
	p := New(Options{APIKey: "k", BaseURL: f.URL})
	var texts []string
	resp, err := llm.Collect(p.Stream(context.Background(), toolRequest("gpt-4.1")), func(c llm.Chunk) {
		if c.Text != "" {
			texts = append(texts, c.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts, "|") != "Checking |both." || resp.Content != "Checking both." {
		t.Errorf("text %q", texts)
	}
	if len(resp.ToolCalls) != 2 || string(resp.ToolCalls[0].Arguments) != `{"key":"a"}` || resp.ToolCalls[0].ID != "call_x" || resp.ToolCalls[1].Name != "kv_list" {
		t.Errorf("tool calls %+v", resp.ToolCalls)
	}
	if resp.Usage.TotalTokens != 70 || resp.FinishReason != "tool_calls" || resp.Model != "gpt-4.1-2025-04-14" {
		t.Errorf("usage %+v finish %q model %q", resp.Usage, resp.FinishReason, resp.Model)
	}
	body := f.Requests()[0].Body
	var sent map[string]any
	json.Unmarshal(body, &sent)
	if sent["stream"] != true || sent["stream_options"].(map[string]any)["include_usage"] != true {
		t.Errorf("stream flags: %s", body)
	}
	checkOpenAPI(t, body)
}

func TestBrokenStream(t *testing.T) {
	f := newServer(t, wiretest.Reply{SSE: wiretest.Data(streamEvents[:3]...), Cut: true})
	p := New(Options{APIKey: "k", BaseURL: f.URL})
	resp, err := llm.Collect(p.Stream(context.Background(), toolRequest("gpt-4.1")), nil)
	if !errors.Is(err, llm.ErrTransient) {
		t.Fatalf("err = %v, want a transient broken stream", err)
	}
	if resp.Content != "Checking both." {
		t.Errorf("what arrived was lost: %q", resp.Content)
	}
}

func TestStreamRetriedBeforeFirstChunk(t *testing.T) {
	f := newServer(t,
		wiretest.Reply{Status: 429, Headers: map[string]string{"Retry-After-Ms": "1"}, Body: `{"error": {"message": "slow down", "type": "requests", "param": null, "code": null}}`},
		wiretest.Reply{SSE: wiretest.Data(streamEvents...)})
	p := llm.Retry(retry.Policy{Attempts: 2})(New(Options{APIKey: "k", BaseURL: f.URL})).(llm.Streamer)
	resp, err := llm.Collect(p.Stream(context.Background(), toolRequest("gpt-4.1")), nil)
	if err != nil || len(resp.ToolCalls) != 2 || len(f.Requests()) != 2 {
		t.Errorf("%+v %v after %d requests", resp, err, len(f.Requests()))
	}
}

func TestHelpers(t *testing.T) {
	for in, want := range map[string]string{"": "http://localhost:11434/v1", "gpu:11434": "http://gpu:11434/v1", "https://o.example/": "https://o.example/v1"} {
		if got := ollamaBase(in); got != want {
			t.Errorf("ollamaBase(%q) = %q", in, got)
		}
	}
	for m, want := range map[string]bool{"o3": true, "o4-mini": true, "gpt-5-mini": true, "o1-preview": true, "gpt-4.1": false, "ft:gpt-4.1-mini:x": false} {
		if IsReasoningModel(m) != want {
			t.Errorf("IsReasoningModel(%q) != %v", m, want)
		}
	}
	var s map[string]any
	json.Unmarshal([]byte(`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}},"required":["a"],"additionalProperties":false}`), &s)
	if !strictCompatible(s) {
		t.Error("a strict schema is not strict-compatible")
	}
	s["properties"].(map[string]any)["a"].(map[string]any)["required"] = []any{}
	if strictCompatible(s) {
		t.Error("an optional nested property passed as strict")
	}
}

func TestAzure(t *testing.T) {
	reply := wiretest.Reply{Body: `{"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4.1-mini",
		"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi from azure"}}],
		"usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}`}
	f := newServer(t, reply, reply)
	t.Setenv("AZURE_OPENAI_API_KEY", "azure-secret")
	m, err := llm.Open("azure:my-deployment", llm.Config{BaseURL: f.URL})
	if err != nil || m.ProviderName != "azure" || m.ID != "my-deployment" {
		t.Fatalf("%v %+v", err, m)
	}
	p, model := m.Provider, m.ID
	resp, err := p.Generate(context.Background(), &llm.Request{Model: model, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil || resp.Content != "hi from azure" {
		t.Fatalf("%+v %v", resp, err)
	}
	r := f.Requests()[0]
	if r.Path != "/openai/deployments/my-deployment/chat/completions" || r.Query != "api-version="+DefaultAzureAPIVersion ||
		r.Header.Get("Api-Key") != "azure-secret" || r.Header.Get("Authorization") != "" {
		t.Errorf("path %s?%s headers %v", r.Path, r.Query, r.Header)
	}
	checkOpenAPI(t, r.Body)
	t.Setenv("AZURE_OPENAI_ENDPOINT", "")
	if _, err := llm.Open("azure:d", llm.Config{}); err == nil || !strings.Contains(err.Error(), "AZURE_OPENAI_ENDPOINT") {
		t.Errorf("no endpoint: %v", err)
	}
	if _, err := llm.Open("azure:d", llm.Config{BaseURL: "http://example.openai.azure.com"}); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("a plain-http endpoint: %v", err)
	}
	// OpenAI's own key in the environment never travels to Azure.
	t.Setenv("OPENAI_API_KEY", "sk-openai-secret")
	m, err = llm.Open("azure:my-deployment", llm.Config{BaseURL: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	p = m.Provider
	if _, err := p.Generate(context.Background(), &llm.Request{Model: "my-deployment", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if r := f.Requests()[1]; r.Header.Get("Authorization") != "" || r.Header.Get("Api-Key") != "azure-secret" {
		t.Errorf("headers %v", r.Header)
	}
}

func TestDriver(t *testing.T) {
	for _, tt := range []struct {
		name, provider string
		window         int
		unknown        bool
	}{
		{"gpt-4.1-mini", "openai", 1_047_576, false},
		{"ft:gpt-4.1-mini:org:x:1", "openai", 1_047_576, false},
		{"o3", "openai", 200_000, false},
		{"openai:gpt-4o", "openai", 128_000, false},
		{"openai:my-finetune", "openai", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test")
			m, err := llm.Open(tt.name, llm.Config{})
			if err != nil || m.ProviderName != tt.provider || m.Capabilities.ContextWindow != tt.window ||
				m.Capabilities.Unknown != tt.unknown || m.Capabilities.Tools == tt.unknown {
				t.Errorf("%+v %v", m, err)
			}
		})
	}
}

// TestTraceParent: a call made in a run with a trace context sends it.
func TestTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	f := newServer(t, wiretest.Reply{Body: toolReply}, wiretest.Reply{Body: toolReply})
	p := New(Options{APIKey: "sk-test", BaseURL: f.URL})
	if _, err := p.Generate(llm.WithTraceContext(context.Background(), tp, "vendor=opaque,other=1"), toolRequest("gpt-4.1-mini")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(context.Background(), toolRequest("gpt-4.1-mini")); err != nil {
		t.Fatal(err)
	}
	if got := f.Requests()[0].Header.Get("traceparent"); got != tp {
		t.Errorf("traceparent %q, want %q", got, tp)
	}
	if got := f.Requests()[0].Header.Get("tracestate"); got != "vendor=opaque,other=1" {
		t.Errorf("tracestate %q, want the caller's", got)
	}
	if got := f.Requests()[1].Header.Get("traceparent"); got != "" {
		t.Errorf("a call without a trace sent traceparent %q", got)
	}
}

// TestCapabilities: each model reports what it can do, not every
// capability for every model; a name of no OpenAI family claims nothing.
func TestCapabilities(t *testing.T) {
	tests := []struct {
		model                     string
		tools, structured, vision bool
		unknown                   bool
	}{
		{"gpt-4.1-mini", true, true, true, false},
		{"gpt-4o-2024-08-06", true, true, true, false},
		{"chatgpt-4o-latest", true, true, true, false},
		{"o1-mini", false, false, false, false},
		{"o3-mini", true, true, false, false},
		{"gpt-3.5-turbo", true, false, false, false},
		{"gpt-4-0613", true, false, false, false},
		{"ft:gpt-4.1-mini:acme:x", true, true, true, false},
		{"gpt-oss-20b", false, false, false, true},
		{"my-finetune", false, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			c := Capabilities(tt.model)
			if c.Tools != tt.tools || c.StructuredOutput != tt.structured || c.Vision != tt.vision ||
				c.Unknown != tt.unknown || c.Streaming == tt.unknown {
				t.Errorf("%+v", c)
			}
		})
	}
	if c, ok := llm.Info("o1-mini"); !ok || c.Tools || c.ContextWindow != 200_000 {
		t.Errorf("llm.Info(o1-mini) = %+v, %v", c, ok)
	}
}

// TestDriverCapabilities: what each driver of this package reports: an
// Azure deployment named after an OpenAI model has that model's abilities
// and window (Azure's gpt-35 spelling included), any other deployment,
// and every Ollama and OpenRouter model, is unknown rather than able to
// do everything.
func TestDriverCapabilities(t *testing.T) {
	unknown := llm.Capabilities{Unknown: true}
	tests := []struct {
		name string
		want llm.Capabilities
	}{
		{"openai:gpt-4o", llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true, Vision: true, ContextWindow: 128_000}},
		{"openai:qwen3", unknown},
		{"azure:gpt-4o", llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true, Vision: true, ContextWindow: 128_000}},
		{"azure:gpt-4.1-mini", llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true, Vision: true, ContextWindow: 1_047_576}},
		{"azure:o1-mini", llm.Capabilities{Streaming: true, ContextWindow: 200_000}},
		{"azure:gpt-35-turbo", llm.Capabilities{Tools: true, Streaming: true}},
		{"azure:my-gpt-4-1-deployment", unknown},
		{"ollama:qwen3", unknown},
		{"ollama:llava:13b", unknown},
		{"openrouter:openai/gpt-4o", unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := llm.Info(tt.name)
			if !ok || got != tt.want {
				t.Errorf("llm.Info = %+v, %v; want %+v", got, ok, tt.want)
			}
		})
	}
}

// TestRouterAzureVision: a router over the drivers' own reports sends
// images to the Azure deployment that takes them, passes over one that
// does not and over an Ollama model whose image input is unknown, and
// still tries that Ollama model for a schema.
func TestRouterAzureVision(t *testing.T) {
	var cands []llm.Candidate
	for _, name := range []string{"azure:gpt-35-turbo", "ollama:qwen3", "azure:gpt-4o"} {
		caps, ok := llm.Info(name)
		if !ok {
			t.Fatalf("%s: no driver", name)
		}
		provider, model := llm.ParseModel(name)
		cands = append(cands, llm.Candidate{Name: provider, Model: model, Caps: caps,
			Provider: llm.ProviderFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
				return &llm.Response{Content: "from " + req.Model}, nil
			})})
	}
	image := []llm.Message{{Role: llm.RoleUser, Content: "What is this?", Media: &llm.Media{Images: []llm.Image{{URL: "https://x.dev/a.png"}}}}}
	text := []llm.Message{{Role: llm.RoleUser, Content: "hi"}}
	tests := []struct {
		name  string
		cands []llm.Candidate
		req   llm.Request
		want  string // the provider that answers, or the reasons of a refusal
	}{
		{"images go to gpt-4o", cands, llm.Request{Messages: image}, "azure"},
		{"images refused", cands[:2], llm.Request{Messages: image}, "azure:gpt-35-turbo: no image input; ollama:qwen3: image input unknown"},
		{"tools to the first", cands, llm.Request{Messages: text, Tools: []llm.ToolSpec{{Name: "t"}}}, "azure"},
		{"a schema to the unknown model", cands[:2], llm.Request{Messages: text, ResponseSchema: json.RawMessage(`{"type":"object"}`)}, "ollama"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := llm.NewRouter(tt.cands, llm.RouterOptions{}).Generate(context.Background(), &tt.req)
			switch {
			case err != nil:
				if !errors.Is(err, llm.ErrNoCandidate) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err %v, want %q", err, tt.want)
				}
			case resp.Provider != tt.want:
				t.Errorf("answered by %s (%s), want %s", resp.Provider, resp.Content, tt.want)
			}
		})
	}
}

// TestImages: a user message's images go as image_url parts: a URL as
// it is, bytes as a data URL.
func TestImages(t *testing.T) {
	f := newServer(t, wiretest.Reply{Body: toolReply})
	p := New(Options{APIKey: "sk-test", BaseURL: f.URL})
	req := &llm.Request{Model: "gpt-4.1-mini", Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is in these?",
		Media: &llm.Media{Images: []llm.Image{{URL: "https://x.dev/cat.png"}, {Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}}}}
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wiretest.JSONEqual(t, f.Requests()[0].Body, `{"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": [
		{"type": "text", "text": "What is in these?"},
		{"type": "image_url", "image_url": {"url": "https://x.dev/cat.png"}},
		{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}]}]}`)
}
