package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// TestPipelineConversation: a pipeline run in a conversation gives each
// of its stages the history it was given, and its input and answer are
// where the conversation's next run starts: an agent's run after it
// sees them.
func TestPipelineConversation(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	var sent [][]string
	model := llm.ProviderFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		var said []string
		for _, m := range req.Messages[1:] {
			said = append(said, m.Role.String()+": "+m.Content)
		}
		mu.Lock()
		sent = append(sent, said)
		mu.Unlock()
		return &llm.Response{Content: `{"note": "ok"}`}, nil
	})
	chat, err := agent.New(&spec.Spec{AgentName: "chat", Version: "v1", SystemText: "Chat.", UserText: "${task}", InputKeys: []string{"task"}},
		agent.WithProvider(model, "func"))
	if err != nil {
		t.Fatal(err)
	}
	reg := agent.NewRegistry()
	if err := reg.Register(chat); err != nil {
		t.Fatal(err)
	}
	d, err := Parse("two", []byte(`{"pipeline_name": "two", "version": "v1", "stages": [
		{"name": "first", "agent": "chat", "output_key": "first"}, {"name": "second", "agent": "chat", "output_key": "second"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(d, t.TempDir(), WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := chat.Run(ctx, map[string]any{"task": "My name is Ada."}, agent.WithStore(st), agent.WithConversation("c")); err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(ctx, map[string]any{"task": "Plan my day."}, WithStore(st), WithConversation("c"))
	if err != nil || !res.Success {
		t.Fatalf("the pipeline: %v", err)
	}
	for i, said := range sent[1:3] {
		if len(said) < 3 || said[0] != "user: My name is Ada." || said[1] != `assistant: {"note": "ok"}` {
			t.Errorf("stage %d was sent %q", i+1, said)
		}
	}
	if _, err := chat.Run(ctx, map[string]any{"task": "And now?"}, agent.WithStore(st), agent.WithConversation("c")); err != nil {
		t.Fatal(err)
	}
	last := strings.Join(sent[3], "\n")
	if !strings.Contains(last, "user: Plan my day.\nassistant: {\"note\":\"ok\"}\nuser: And now?") {
		t.Errorf("the run after the pipeline was sent:\n%s", last)
	}
	if runs, _ := st.List(ctx, store.Filter{Conversation: "c"}); len(runs) != 3 || runs[1].Kind != "pipeline" {
		t.Errorf("the conversation's runs: %+v", runs)
	}
	if _, err := p.Run(ctx, nil, WithConversation("c")); !errors.Is(err, ErrInvalid) {
		t.Errorf("a conversation without a store: %v", err)
	}
}
