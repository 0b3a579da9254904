package gemini

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

func request() *llm.Request {
	return &llm.Request{
		Model: "gemini-2.5-flash",
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are a release assistant."},
			{Role: llm.RoleUser, Content: "What changed in x 2.0?"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "http_get", Arguments: json.RawMessage(`{"url":"https://x.dev"}`), Signature: []byte("sig-1")},
				{ID: "call_2", Name: "kv_get", Arguments: json.RawMessage(`{"key":"x"}`)},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_1", Name: "http_get", Content: `{"status":200,"body":"notes"}`},
			{Role: llm.RoleTool, ToolCallID: "call_2", Name: "kv_get", Content: `{"status":"error","error":{"type":"not_found","message":"key \"x\" not found"}}`},
		},
		Tools: []llm.ToolSpec{
			{Name: "http_get", Description: "Fetch a URL.", Parameters: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`)},
			{Name: "kv_get", Description: "Read a key.", Parameters: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)},
		},
		Temperature:     ptr(0.25),
		TopP:            ptr(0.5),
		MaxOutputTokens: 512,
		ToolChoice:      "kv_get",
	}
}

const wantRequest = `{
  "contents": [
    {"role": "user", "parts": [{"text": "What changed in x 2.0?"}]},
    {"role": "model", "parts": [
      {"functionCall": {"id": "call_1", "name": "http_get", "args": {"url": "https://x.dev"}}, "thoughtSignature": "c2lnLTE="},
      {"functionCall": {"id": "call_2", "name": "kv_get", "args": {"key": "x"}}}]},
    {"role": "user", "parts": [
      {"functionResponse": {"id": "call_1", "name": "http_get", "response": {"output": {"status": 200, "body": "notes"}}}},
      {"functionResponse": {"id": "call_2", "name": "kv_get", "response": {"error": {"type": "not_found", "message": "key \"x\" not found"}}}}]}
  ],
  "systemInstruction": {"role": "user", "parts": [{"text": "You are a release assistant."}]},
  "tools": [{"functionDeclarations": [
    {"name": "http_get", "description": "Fetch a URL.", "parametersJsonSchema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}},
    {"name": "kv_get", "description": "Read a key.", "parametersJsonSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}]}],
  "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["kv_get"]}},
  "generationConfig": {"temperature": 0.25, "topP": 0.5, "maxOutputTokens": 512}
}`

// checkStructure asserts the generateContent rules: no system role in
// contents, roles alternate user/model starting with user, and every
// functionResponse answers a functionCall of the model turn before it.
func checkStructure(t *testing.T, body []byte) {
	t.Helper()
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionCall     *struct{ ID, Name string } `json:"functionCall"`
				FunctionResponse *struct{ ID, Name string } `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	calls := map[string]bool{}
	for i, c := range req.Contents {
		want := map[bool]string{true: "user", false: "model"}[i%2 == 0]
		if c.Role != want {
			t.Errorf("content %d has role %q, want %q", i, c.Role, want)
		}
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				calls[p.FunctionCall.ID+"/"+p.FunctionCall.Name] = true
			}
			if p.FunctionResponse != nil && !calls[p.FunctionResponse.ID+"/"+p.FunctionResponse.Name] {
				t.Errorf("content %d: functionResponse %s answers no call", i, p.FunctionResponse.Name)
			}
		}
		if c.Role == "user" {
			calls = map[string]bool{}
		}
	}
}

func TestGenerate(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{Body: `{"candidates": [{"content": {"role": "model", "parts": [
		{"text": "Checking y."}, {"functionCall": {"name": "http_get", "args": {"url": "https://y.dev"}}, "thoughtSignature": "c2lnLTI="}, {"functionCall": {"name": "kv_get", "args": {"key": "y"}}}]},
		"finishReason": "STOP", "index": 0}],
		"usageMetadata": {"promptTokenCount": 1200, "candidatesTokenCount": 30, "thoughtsTokenCount": 20, "totalTokenCount": 1250, "cachedContentTokenCount": 1024},
		"modelVersion": "gemini-2.5-flash", "responseId": "r1"}`})
	resp, err := New(Options{APIKey: "AIza-secret", BaseURL: s.URL}).Generate(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if r.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || r.Header.Get("X-Goog-Api-Key") != "AIza-secret" {
		t.Errorf("path %s key %q", r.Path, r.Header.Get("X-Goog-Api-Key"))
	}
	wiretest.JSONEqual(t, r.Body, wantRequest)
	checkStructure(t, r.Body)
	if resp.Content != "Checking y." || len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "call_1" || resp.ToolCalls[1].ID != "call_2" ||
		string(resp.ToolCalls[0].Signature) != "sig-2" || resp.ToolCalls[1].Signature != nil ||
		string(resp.ToolCalls[1].Arguments) != `{"key":"y"}` {
		t.Errorf("resp %+v", resp)
	}
	if want := (llm.Usage{PromptTokens: 1200, CompletionTokens: 50, TotalTokens: 1250, CachedPromptTokens: 1024}); resp.Usage != want || resp.FinishReason != "STOP" {
		t.Errorf("usage %+v finish %q", resp.Usage, resp.FinishReason)
	}
	cost, _ := llm.DefaultPricing().Cost(resp.Model, resp.Usage)
	if want := (176*0.30 + 1024*0.075 + 50*2.50) / 1e6; cost < want-1e-12 || cost > want+1e-12 {
		t.Errorf("cost %v, want %v", cost, want)
	}
}

func TestStructuredOutput(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{Body: `{"candidates": [{"content": {"role": "model", "parts": [{"text": "{\"tone\": \"direct\"}"}]}, "finishReason": "STOP"}],
		"usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 4, "totalTokenCount": 9}, "modelVersion": "gemini-2.5-pro"}`})
	resp, err := New(Options{APIKey: "k", BaseURL: s.URL}).Generate(context.Background(), &llm.Request{Model: "gemini-2.5-pro",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Label it."}}, ResponseSchema: json.RawMessage(`{"type":"object","properties":{"tone":{"type":"string"}},"required":["tone"]}`)})
	if err != nil || resp.Content != `{"tone": "direct"}` {
		t.Fatalf("%+v %v", resp, err)
	}
	wiretest.JSONEqual(t, s.Requests()[0].Body, `{"contents": [{"role": "user", "parts": [{"text": "Label it."}]}],
		"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object", "properties": {"tone": {"type": "string"}}, "required": ["tone"]}}}`)
}

func TestErrors(t *testing.T) {
	tests := []struct {
		status int
		body   string
		kind   llm.Kind
		retry  time.Duration
		msg    string
	}{
		{429, `{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED",
			"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "21s"}]}}`, llm.KindRateLimited, 21 * time.Second, "Resource has been exhausted"},
		{503, `{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}`, llm.KindOverloaded, 0, "overloaded"},
		{400, `{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}}`, llm.KindInvalidRequest, 0, "API key not valid"},
		{403, `{"error": {"code": 403, "message": "Permission denied.", "status": "PERMISSION_DENIED"}}`, llm.KindAuth, 0, "Permission denied"},
		{400, `{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}`, llm.KindContextTooLong, 0, "exceeds the maximum"},
		{500, `{"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}}`, llm.KindTransient, 0, "internal error"},
	}
	for _, tt := range tests {
		s := wiretest.New(t, wiretest.Reply{Status: tt.status, Body: tt.body})
		_, err := New(Options{APIKey: "AIza-secret", BaseURL: s.URL}).Generate(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}})
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.Kind != tt.kind || ae.RetryAfter != tt.retry || ae.Status != tt.status {
			t.Errorf("%d: err = %#v", tt.status, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.msg) || !strings.Contains(msg, "gemini-2.5-flash") || strings.Contains(msg, "AIza-secret") {
			t.Errorf("message %q", msg)
		}
	}
}

func TestNoDoubleRetries(t *testing.T) {
	fail := wiretest.Reply{Status: 500, Body: `{"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}`}
	s := wiretest.New(t, fail, fail, fail)
	p := llm.Retry(retry.Policy{Attempts: 2, InitialBackoff: time.Millisecond})(New(Options{APIKey: "k", BaseURL: s.URL}))
	if _, err := p.Generate(context.Background(), &llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}}); !errors.Is(err, llm.ErrTransient) {
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("%d requests for 2 attempts", n)
	}
}

var events = []string{
	`{"candidates": [{"content": {"role": "model", "parts": [{"text": "Looking "}]}, "index": 0}], "modelVersion": "gemini-2.5-flash"}`,
	`{"candidates": [{"content": {"role": "model", "parts": [{"text": "it up."}]}, "index": 0}], "modelVersion": "gemini-2.5-flash"}`,
	`{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "kv_get", "args": {"key": "trip"}}}]}, "finishReason": "STOP", "index": 0}],
	  "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 12, "totalTokenCount": 92}, "modelVersion": "gemini-2.5-flash"}`,
}

func TestStream(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{SSE: wiretest.Data(events...)})
	var texts []string
	resp, err := llm.Collect(New(Options{APIKey: "k", BaseURL: s.URL}).Stream(context.Background(), request()), func(c llm.Chunk) {
		if c.Text != "" {
			texts = append(texts, c.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if r.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || !strings.Contains(r.Query, "alt=sse") {
		t.Errorf("path %s?%s", r.Path, r.Query)
	}
	checkStructure(t, r.Body)
	if strings.Join(texts, "|") != "Looking |it up." || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != `{"key":"trip"}` ||
		resp.Usage.TotalTokens != 92 || resp.FinishReason != "STOP" {
		t.Errorf("texts %q resp %+v", texts, resp)
	}
}

func TestBrokenStream(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{SSE: wiretest.Data(events[:2]...), Cut: true})
	resp, err := llm.Collect(New(Options{APIKey: "k", BaseURL: s.URL}).Stream(context.Background(), request()), nil)
	if !errors.Is(err, llm.ErrTransient) || resp.Content != "Looking it up." {
		t.Errorf("%q %v", resp.Content, err)
	}
}

func TestNoKey(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "")
	_, err := New(Options{}).Generate(context.Background(), &llm.Request{Model: "gemini-2.5-flash"})
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("%v", err)
	}
}

// TestTraceParent: a call made in a run with a trace context sends it.
func TestTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	s := wiretest.New(t, wiretest.Reply{Body: `{"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP", "index": 0}],
		"usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}, "modelVersion": "gemini-2.5-flash"}`})
	if _, err := New(Options{APIKey: "AIza", BaseURL: s.URL}).Generate(llm.WithTraceContext(context.Background(), tp, "vendor=opaque,other=1"), request()); err != nil {
		t.Fatal(err)
	}
	if got := s.Requests()[0].Header.Get("traceparent"); got != tp {
		t.Errorf("traceparent %q, want %q", got, tp)
	}
	if got := s.Requests()[0].Header.Get("tracestate"); got != "vendor=opaque,other=1" {
		t.Errorf("tracestate %q, want the caller's", got)
	}
}

// TestImages: a user message's images go as parts: bytes inline with
// their MIME type, a URL as file data.
func TestImages(t *testing.T) {
	s := wiretest.New(t, wiretest.Reply{Body: `{"candidates": [{"content": {"role": "model", "parts": [{"text": "a cat"}]}, "finishReason": "STOP", "index": 0}],
		"usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}, "modelVersion": "gemini-2.5-flash"}`})
	req := &llm.Request{Model: "gemini-2.5-flash", Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is in these?",
		Media: &llm.Media{Images: []llm.Image{{URL: "https://x.dev/cat.png"}, {Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}}}}}
	if _, err := New(Options{APIKey: "AIza", BaseURL: s.URL}).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wiretest.JSONEqual(t, s.Requests()[0].Body, `{"contents": [{"role": "user", "parts": [{"text": "What is in these?"},
		{"fileData": {"fileUri": "https://x.dev/cat.png", "mimeType": "image/png"}},
		{"inlineData": {"data": "iVBORw==", "mimeType": "image/png"}}]}], "generationConfig": {}}`)
}

// TestCapabilities: each Gemini family reports its own abilities and
// window through the registered driver, and a name of no family (or a
// speech, image or embedding model) claims nothing.
func TestCapabilities(t *testing.T) {
	modern := llm.Capabilities{Tools: true, StructuredOutput: true, Streaming: true, Vision: true, ContextWindow: 1_048_576}
	twoM := modern
	twoM.ContextWindow = 2_097_152
	unknown := llm.Capabilities{Unknown: true}
	tests := []struct {
		model string
		want  llm.Capabilities
	}{
		{"gemini-1.5-flash", modern},
		{"gemini-1.5-flash-8b-001", modern},
		{"gemini-1.5-pro-002", twoM},
		{"gemini-2.0-flash", modern},
		{"gemini-2.0-flash-lite", modern},
		{"gemini-2.5-flash", modern},
		{"gemini-2.5-pro", modern},
		{"models/gemini-2.5-flash-lite", modern},
		{"gemini-3-pro-preview", modern},
		{"gemini-1.0-pro", llm.Capabilities{Tools: true, Streaming: true, ContextWindow: 32_760}},
		{"gemini-pro", llm.Capabilities{Tools: true, Streaming: true, ContextWindow: 32_760}},
		{"gemini-1.0-pro-vision-001", llm.Capabilities{Streaming: true, Vision: true, ContextWindow: 16_384}},
		{"gemini-2.5-flash-preview-tts", unknown},
		{"gemini-2.5-flash-image", unknown},
		{"gemini-embedding-001", unknown},
		{"gemini-ultra", unknown},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := Capabilities(tt.model); got != tt.want {
				t.Errorf("Capabilities = %+v, want %+v", got, tt.want)
			}
			got, ok := llm.Info("gemini:" + tt.model)
			if !ok || got != tt.want {
				t.Errorf("llm.Info = %+v, %v; want %+v", got, ok, tt.want)
			}
		})
	}
}
