package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/wiretest"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/retry"
)

func ptr[T any](v T) *T { return &v }

// checkStructure asserts the Messages API's structural rules on a request
// body: the system prompt is the top-level "system", roles alternate
// starting with the user, and every tool_use is answered by a tool_result
// in the next user turn and every tool_result answers one.
func checkStructure(t *testing.T, body []byte) {
	t.Helper()
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("body: %v", err)
	}
	pending := map[string]bool{}
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			t.Errorf("message %d has role %q, want %q (roles must alternate, starting with user)", i, m.Role, want)
		}
		if len(m.Content) == 0 {
			t.Errorf("message %d is empty", i)
		}
		answered := map[string]bool{}
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				pending[b.ID] = true
			case "tool_result":
				if m.Role != "user" || !pending[b.ToolUseID] {
					t.Errorf("message %d: tool_result %s answers no tool_use of the previous turn", i, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
			}
		}
		if m.Role == "user" {
			for id := range pending {
				if !answered[id] && i > 0 {
					t.Errorf("message %d: tool_use %s is not answered", i, id)
				}
			}
			pending = map[string]bool{}
		}
	}
}

func transcript() []llm.Message {
	return []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a release assistant."},
		{Role: llm.RoleUser, Content: "What changed in x 2.0?"},
		{Role: llm.RoleAssistant, Content: "Let me look.", ToolCalls: []llm.ToolCall{
			{ID: "toolu_a", Name: "http_get", Arguments: json.RawMessage(`{"url":"https://x.dev/releases/2.0"}`)},
			{ID: "toolu_b", Name: "kv_get", Arguments: json.RawMessage(`{"key":"x"}`)},
		}},
		{Role: llm.RoleTool, ToolCallID: "toolu_a", Name: "http_get", Content: `{"status":200,"body":"notes"}`},
		{Role: llm.RoleTool, ToolCallID: "toolu_b", Name: "kv_get", Content: `{"status":"error","error":{"type":"not_found"}}`},
		{Role: llm.RoleUser, Content: "Also check y."},
	}
}

var tools = []llm.ToolSpec{
	{Name: "http_get", Description: "Fetch a URL.", Parameters: json.RawMessage(
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"url":{"type":"string"}},"required":["url"],"additionalProperties":false}`)},
	{Name: "kv_get", Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)},
}

const wantRequest = `{
  "model": "claude-sonnet-4-5",
  "max_tokens": 1024,
  "temperature": 0.3,
  "system": [{"type": "text", "text": "You are a release assistant."}],
  "messages": [
    {"role": "user", "content": [{"type": "text", "text": "What changed in x 2.0?"}]},
    {"role": "assistant", "content": [
      {"type": "text", "text": "Let me look."},
      {"type": "tool_use", "id": "toolu_a", "name": "http_get", "input": {"url": "https://x.dev/releases/2.0"}},
      {"type": "tool_use", "id": "toolu_b", "name": "kv_get", "input": {"key": "x"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_a", "is_error": false, "content": [{"type": "text", "text": "{\"status\":200,\"body\":\"notes\"}"}]},
      {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": true, "content": [{"type": "text", "text": "{\"status\":\"error\",\"error\":{\"type\":\"not_found\"}}"}]},
      {"type": "text", "text": "Also check y."}]}
  ],
  "tools": [
    {"name": "http_get", "description": "Fetch a URL.", "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"], "additionalProperties": false}},
    {"name": "kv_get", "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}
  ],
  "tool_choice": {"type": "any"}
}`

const toolReply = `{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "Checking both."},
    {"type": "tool_use", "id": "toolu_01", "name": "http_get", "input": {"url": "https://y.dev"}},
    {"type": "tool_use", "id": "toolu_02", "name": "kv_get", "input": {"key": "y"}}],
  "stop_reason": "tool_use", "stop_sequence": null,
  "usage": {"input_tokens": 500, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000, "output_tokens": 80}}`

func TestGenerate(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{Body: toolReply})
	p := New(Options{APIKey: "sk-ant-secret", BaseURL: s.URL})
	resp, err := p.Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: transcript(), Tools: tools,
		Temperature: ptr(0.3), MaxOutputTokens: 1024, ToolChoice: "required"})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if r.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "sk-ant-secret" || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("path %s headers %v", r.Path, r.Header)
	}
	wiretest.JSONEqual(t, r.Body, wantRequest)
	checkStructure(t, r.Body)
	if resp.Content != "Checking both." || len(resp.ToolCalls) != 2 || resp.ToolCalls[1].ID != "toolu_02" || string(resp.ToolCalls[1].Arguments) != `{"key": "y"}` {
		t.Errorf("resp %+v", resp)
	}
	if want := (llm.Usage{PromptTokens: 2600, CompletionTokens: 80, TotalTokens: 2680, CachedPromptTokens: 2000}); resp.Usage != want || resp.FinishReason != "tool_use" {
		t.Errorf("usage %+v finish %q", resp.Usage, resp.FinishReason)
	}
	cost, _ := llm.DefaultPricing().Cost(resp.Model, resp.Usage)
	if want := (600*3.0 + 2000*0.30 + 80*15.0) / 1e6; cost < want-1e-12 || cost > want+1e-12 {
		t.Errorf("cost %v, want %v", cost, want)
	}
}

func TestStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"tone":{"type":"string"}},"required":["tone"],"additionalProperties":false}`)
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "Label it."}}

	// A model with native JSON output gets output_config.format.
	s := wiretest.New(t, wiretest.Reply{Body: `{"id": "m", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": [{"type": "text", "text": "{\"tone\": \"direct\"}"}], "stop_reason": "end_turn", "stop_sequence": null,
		"usage": {"input_tokens": 10, "output_tokens": 5}}`})
	resp, err := New(Options{APIKey: "k", BaseURL: s.URL}).Generate(context.Background(), &llm.Request{Model: "claude-sonnet-4-5", Messages: msgs, ResponseSchema: schema})
	if err != nil || resp.Content != `{"tone": "direct"}` {
		t.Fatalf("%+v %v", resp, err)
	}
	var sent map[string]any
	json.Unmarshal(s.Requests()[0].Body, &sent)
	if f, _ := sent["output_config"].(map[string]any)["format"].(map[string]any); f["type"] != "json_schema" || f["schema"] == nil {
		t.Errorf("native format not requested: %s", s.Requests()[0].Body)
	}

	// An older model gets a forced tool, and its input becomes the answer.
	s = wiretest.New(t, wiretest.Reply{Body: `{"id": "m", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-20241022",
		"content": [{"type": "tool_use", "id": "toolu_1", "name": "structured_output", "input": {"tone": "formal"}}],
		"stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}}`})
	resp, err = New(Options{APIKey: "k", BaseURL: s.URL}).Generate(context.Background(), &llm.Request{Model: "claude-3-5-haiku", Messages: msgs, ResponseSchema: schema})
	if err != nil || resp.Content != `{"tone": "formal"}` || len(resp.ToolCalls) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	body := s.Requests()[0].Body
	sent = nil
	json.Unmarshal(body, &sent)
	if tc := sent["tool_choice"].(map[string]any); tc["type"] != "tool" || tc["name"] != "structured_output" {
		t.Errorf("tool not forced: %s", body)
	}
	checkStructure(t, body)
}

func TestErrors(t *testing.T) {
	tests := []struct {
		status  int
		headers map[string]string
		body    string
		kind    llm.Kind
		retry   time.Duration
		msg     string
	}{
		{429, map[string]string{"Retry-After": "3"}, `{"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}`,
			llm.KindRateLimited, 3 * time.Second, "per-minute rate limit (rate_limit_error)"},
		{529, nil, `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`, llm.KindOverloaded, 0, "Overloaded"},
		{401, nil, `{"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}`, llm.KindAuth, 0, "invalid x-api-key"},
		{400, nil, `{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}`, llm.KindContextTooLong, 0, "prompt is too long"},
		{400, nil, `{"type": "error", "error": {"type": "invalid_request_error", "message": "messages: roles must alternate"}}`, llm.KindInvalidRequest, 0, "roles must alternate"},
		{404, nil, `{"type": "error", "error": {"type": "not_found_error", "message": "model: claude-9"}}`, llm.KindNotFound, 0, "claude-9"},
		{500, nil, `{"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}`, llm.KindTransient, 0, "Internal server error"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.kind), func(t *testing.T) {
			s := wiretest.New(t, wiretest.Reply{Status: tt.status, Headers: tt.headers, Body: tt.body})
			_, err := New(Options{APIKey: "sk-ant-secret", BaseURL: s.URL}).Generate(context.Background(),
				&llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Kind != tt.kind || ae.RetryAfter != tt.retry || ae.Status != tt.status {
				t.Fatalf("err = %#v", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.msg) || !strings.Contains(msg, "anthropic") || !strings.Contains(msg, "claude-sonnet-4-5") || strings.Contains(msg, "sk-ant-secret") {
				t.Errorf("message %q", msg)
			}
		})
	}
	if n := len(wiretest.New(t).Requests()); n != 0 {
		t.Fatal(n)
	}
}

func TestNoDoubleRetries(t *testing.T) {
	fail := wiretest.Reply{Status: 529, Body: `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`}
	s := wiretest.New(t, fail, fail, fail)
	p := llm.Retry(retry.Policy{Attempts: 2, InitialBackoff: time.Millisecond})(New(Options{APIKey: "k", BaseURL: s.URL}))
	if _, err := p.Generate(context.Background(), &llm.Request{Model: "claude-haiku-4-5", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}); !errors.Is(err, llm.ErrOverloaded) {
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("%d requests for 2 attempts", n)
	}
}

func streamEvents() []wiretest.Event {
	ev := func(name, data string) wiretest.Event { return wiretest.Event{Name: name, Data: data} }
	return []wiretest.Event{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":300,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"output_tokens":1}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		ev("ping", `{"type": "ping"}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Looking "}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"it up."}}`),
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_9","name":"kv_get","input":{}}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"key\": \"tr"}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ip\"}"}}`),
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`),
		ev("message_stop", `{"type":"message_stop"}`),
	}
}

func TestStream(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{SSE: streamEvents()})
	var texts []string
	resp, err := llm.Collect(New(Options{APIKey: "k", BaseURL: s.URL}).Stream(context.Background(),
		&llm.Request{Model: "claude-sonnet-4-5", Messages: transcript(), Tools: tools}), func(c llm.Chunk) {
		if c.Text != "" {
			texts = append(texts, c.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts, "|") != "Looking |it up." || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != `{"key": "trip"}` || resp.ToolCalls[0].ID != "toolu_9" {
		t.Errorf("texts %q resp %+v", texts, resp)
	}
	if resp.Usage != (llm.Usage{PromptTokens: 300, CompletionTokens: 42, TotalTokens: 342}) || resp.FinishReason != "tool_use" {
		t.Errorf("usage %+v finish %q", resp.Usage, resp.FinishReason)
	}
	body := s.Requests()[0].Body
	var sent map[string]any
	json.Unmarshal(body, &sent)
	if sent["stream"] != true {
		t.Errorf("not streamed: %s", body)
	}
	checkStructure(t, body)
}

func TestBrokenStream(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{SSE: streamEvents()[:5], Cut: true})
	resp, err := llm.Collect(New(Options{APIKey: "k", BaseURL: s.URL}).Stream(context.Background(),
		&llm.Request{Model: "claude-sonnet-4-5", Messages: transcript()}), nil)
	if !errors.Is(err, llm.ErrTransient) || resp.Content != "Looking it up." {
		t.Errorf("%q %v", resp.Content, err)
	}
}

func TestNoKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	s := wiretest.New(t)
	_, err := New(Options{BaseURL: s.URL}).Generate(context.Background(), &llm.Request{Model: "claude-haiku-4-5", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || len(s.Requests()) != 0 {
		t.Errorf("%v", err)
	}
}

// TestBaseURLFromEnvironment: ANTHROPIC_BASE_URL is where a keyed
// provider with no BaseURL of its own goes, an explicit BaseURL wins, and
// ANTHROPIC_CUSTOM_HEADERS are sent, as the SDK's own client does.
func TestBaseURLFromEnvironment(t *testing.T) {
	env := wiretest.New(t, wiretest.Reply{Body: toolReply})
	own := wiretest.New(t, wiretest.Reply{Body: toolReply})
	t.Setenv("ANTHROPIC_BASE_URL", env.URL)
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Team: search\nX-Cost-Center : 42")
	req := &llm.Request{Model: "claude-sonnet-4-5", Messages: transcript(), MaxOutputTokens: 10}
	for _, o := range []Options{{APIKey: "k"}, {APIKey: "k", BaseURL: own.URL}} {
		if _, err := New(o).Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if len(env.Requests()) != 1 || len(own.Requests()) != 1 {
		t.Errorf("environment's server got %d calls, the explicit one %d; want 1 and 1", len(env.Requests()), len(own.Requests()))
	}
	h := env.Requests()[0].Header
	if h.Get("X-Api-Key") != "k" || h.Get("X-Team") != "search" || h.Get("X-Cost-Center") != "42" {
		t.Errorf("headers %v; want the key and the custom headers", h)
	}
}

// TestTraceParent: a call made in a run with a trace context sends it.
func TestTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	s := wiretest.New(t, wiretest.Reply{Body: toolReply})
	p := New(Options{APIKey: "sk-ant", BaseURL: s.URL})
	if _, err := p.Generate(llm.WithTraceContext(context.Background(), tp, "vendor=opaque,other=1"), &llm.Request{Model: "claude-sonnet-4-5", Messages: transcript(), MaxOutputTokens: 10}); err != nil {
		t.Fatal(err)
	}
	if got := s.Requests()[0].Header.Get("traceparent"); got != tp {
		t.Errorf("traceparent %q, want %q", got, tp)
	}
	if got := s.Requests()[0].Header.Get("tracestate"); got != "vendor=opaque,other=1" {
		t.Errorf("tracestate %q, want the caller's", got)
	}
}

// TestImages: a user message's images go as image blocks before its text:
// a URL source, or base64 with its media type.
func TestImages(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{Body: toolReply})
	p := New(Options{APIKey: "sk-ant", BaseURL: s.URL})
	req := &llm.Request{Model: "claude-sonnet-4-5", MaxOutputTokens: 10, Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is in these?",
		Media: &llm.Media{Images: []llm.Image{{URL: "https://x.dev/cat.png"}, {Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}}}}
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wiretest.JSONEqual(t, s.Requests()[0].Body, `{"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": [
		{"type": "image", "source": {"type": "url", "url": "https://x.dev/cat.png"}},
		{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
		{"type": "text", "text": "What is in these?"}]}]}`)
}

// TestCapabilities: each Claude family reports its own abilities and
// window through the registered driver, and a name of no family claims
// nothing.
func TestCapabilities(t *testing.T) {
	modern := llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true, Vision: true, ContextWindow: 200_000}
	legacy := llm.Capabilities{Streaming: true, ContextWindow: 100_000}
	withWindow := func(c llm.Capabilities, w int) llm.Capabilities { c.ContextWindow = w; return c }
	blind := modern
	blind.Vision = false
	tests := []struct {
		model string
		want  llm.Capabilities
	}{
		{"claude-3-haiku-20240307", modern},
		{"claude-3-opus-latest", modern},
		{"claude-3-5-sonnet-20241022", modern},
		{"claude-3-5-haiku-20241022", blind},
		{"claude-3-7-sonnet-latest", modern},
		{"claude-sonnet-4-20250514", modern},
		{"claude-sonnet-4-5", modern},
		{"claude-opus-4-1-20250805", modern},
		{"claude-haiku-4-5", modern},
		{"claude-opus-5", withWindow(modern, 0)},
		{"claude-2.1", withWindow(legacy, 200_000)},
		{"claude-2.0", legacy},
		{"claude-instant-1.2", legacy},
		{"claude-sonnet-x", llm.Capabilities{Unknown: true}},
		{"claude-next", llm.Capabilities{Unknown: true}},
		{"claude", llm.Capabilities{Unknown: true}},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := Capabilities(tt.model); got != tt.want {
				t.Errorf("Capabilities = %+v, want %+v", got, tt.want)
			}
			got, ok := llm.Info("anthropic:" + tt.model)
			if !ok || got != tt.want {
				t.Errorf("llm.Info = %+v, %v; want %+v", got, ok, tt.want)
			}
		})
	}
}
