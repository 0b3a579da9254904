package livetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentry/agentry/llm"
)

// ToolCall asks a real model to call a tool, whole and streamed, and checks
// that it does.
func ToolCall(t *testing.T, p llm.Provider, model string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := &llm.Request{Model: model, MaxOutputTokens: 200,
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
	s, ok := p.(llm.Streamer)
	if !ok {
		return
	}
	streamed, err := llm.Collect(s.Stream(ctx, req), nil)
	if err != nil || len(streamed.ToolCalls) != 1 || !json.Valid(streamed.ToolCalls[0].Arguments) {
		t.Errorf("streamed %+v %v", streamed, err)
	}
}
