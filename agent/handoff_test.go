package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/agentry/agentry/event"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
)

func TestHandoff(t *testing.T) {
	a, err := FromDir("testdata/agents", "triage", WithTools(testTools(t)))
	if err != nil {
		t.Fatal(err)
	}
	var transfers []string
	res, err := a.Run(context.Background(), map[string]any{"question": "Is invoice 42 paid?"}, WithEvents(func(e event.Event) {
		if e.Type == event.ToolCallEnd && strings.HasPrefix(e.Tool.Name, handoffPrefix) {
			transfers = append(transfers, e.Tool.Name+":"+e.Tool.Status)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != "Invoice 42 is paid." || strings.Join(res.Handoffs, ",") != "billing@v1" || res.AgentName != "triage" {
		t.Fatalf("result %q handoffs %v", res.Result, res.Handoffs)
	}
	if res.Messages[0].Role != llm.RoleSystem || res.Messages[0].Content != "You answer billing questions." {
		t.Errorf("system prompt after the handoff: %q", res.Messages[0].Content)
	}
	if res.Messages[1].Content != `question = "Is invoice 42 paid?"` {
		t.Errorf("the conversation was not kept: %+v", res.Messages[1])
	}
	if len(transfers) != 1 || transfers[0] != "transfer_to_billing:success" {
		t.Errorf("transfer events %v", transfers)
	}
	agents := []string{}
	for _, c := range res.ModelCalls {
		agents = append(agents, c.Agent)
	}
	if strings.Join(agents, ",") != ",billing,billing" || res.TokenUsage.TotalTokens != 50+68+86 {
		t.Errorf("model calls by %v, usage %+v", agents, res.TokenUsage)
	}
	if !strings.Contains(res.Steps[0].Observation, `"transferred_to":"billing"`) || res.Steps[1].Action.Tool != "echo" {
		t.Errorf("steps %+v", res.Steps)
	}
}

func TestHandoffSpecErrors(t *testing.T) {
	for _, tt := range []struct{ spec, want string }{
		{`{"agent_name": "a", "version": "v1", "model_name": "m", "mode": "react", "handoffs": ["b"]}`, "handoffs work in mode tools only"},
		{`{"agent_name": "a", "version": "v1", "model_name": "m", "handoffs": ["a"]}`, `handoffs[0] "a": name another agent`},
	} {
		if _, err := spec.Parse("s", []byte(tt.spec)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v, want %q", err, tt.want)
		}
	}
	s := mustSpec(t, `{"agent_name": "a", "version": "v1", "model_name": "scripted:testdata/scripts/spare.json", "handoffs": ["ghost"]}`)
	if _, err := New(s, WithAgents(spec.Dir{Path: "testdata/agents"})); err == nil || !strings.Contains(err.Error(), `handoffs[0] "ghost"`) {
		t.Errorf("unknown handoff: %v", err)
	}
}
