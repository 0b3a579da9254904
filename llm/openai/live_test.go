package openai

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentry/agentry/internal/livetest"
	"github.com/agentry/agentry/llm"
)

// TestLive calls the real API; it runs only with OPENAI_API_KEY set, never in CI.
func TestLive(t *testing.T) {
	key := livetest.Key(t, "OPENAI_API_KEY")
	p := New(Options{APIKey: key})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := &llm.Request{Model: "gpt-4.1-mini", MaxOutputTokens: 200,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Add 2 and 3 with the add tool."}},
		Tools: []llm.ToolSpec{{Name: "add", Description: "Add two integers.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)}},
		ToolChoice: "required"}
	resp, err := p.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "add" || resp.Usage.TotalTokens == 0 {
		t.Errorf("reply %+v", resp)
	}
	streamed, err := llm.Collect(p.Stream(ctx, req), nil)
	if err != nil || len(streamed.ToolCalls) != 1 || !json.Valid(streamed.ToolCalls[0].Arguments) {
		t.Errorf("streamed %+v %v", streamed, err)
	}
}
