package eval_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentry/agentry/agent"
	"github.com/agentry/agentry/eval"
	"github.com/agentry/agentry/internal/teststore"
	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/spec"
	"github.com/agentry/agentry/store"
)

// TestConversationCase: a case may be a conversation: each turn a run
// that starts from what was said before, with its own assertions; the
// case passes when every turn does, its checks say which turn failed,
// and a rescore scores the stored turns again without a model.
func TestConversationCase(t *testing.T) {
	calls := 0
	model := llm.ProviderFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		calls++
		name := "nobody"
		for _, m := range req.Messages {
			if _, after, ok := strings.Cut(m.Content, "My name is "); ok {
				name, _, _ = strings.Cut(after, ".")
			}
		}
		return &llm.Response{Content: "You are " + name + "."}, nil
	})
	a, err := agent.New(&spec.Spec{AgentName: "chat", Version: "v1", SystemText: "Chat.", UserText: "${message}", InputKeys: []string{"message"}},
		agent.WithProvider(model, "func"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := eval.Parse("chat.json", []byte(`{"name": "chat", "cases": [
		{"name": "remembers", "conversation": [
			{"message": "My name is Ada."},
			{"message": "Who am I?", "assert": [{"type": "contains", "value": "Ada"}]}]},
		{"name": "forgets nothing", "tags": ["memory"], "conversation": [
			{"input": {"message": "My name is Bob."}, "assert": [{"type": "contains", "value": "Bob"}]},
			{"message": "Who am I?", "assert": [{"type": "contains", "value": "Ada"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	st := teststore.Open(t)
	rep, err := eval.Run(context.Background(), ds, []eval.Target{{Label: "chat@v1", Agent: a}}, eval.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cases := rep.Agents[0].Cases
	if len(cases) != 2 || !cases[0].Passed || cases[1].Passed || rep.Agents[0].Passed != 1 {
		t.Fatalf("the cases: %+v", cases)
	}
	second := cases[1]
	if len(second.Runs) != 2 || second.RunID != second.Runs[1] || second.Conversation == "" || second.Steps != 2 {
		t.Errorf("the conversation case: %+v", second)
	}
	failed := ""
	for _, ck := range second.Checks {
		if !ck.Passed {
			failed += ck.Type + "@" + string(rune('0'+ck.Turn)) + " "
		}
	}
	if failed != "contains@2 " {
		t.Errorf("the failed checks: %q (%+v)", failed, second.Checks)
	}
	runs, _ := st.List(context.Background(), store.Filter{Conversation: second.Conversation})
	if len(runs) != 2 || runs[0].ParentID != rep.ID {
		t.Errorf("the conversation's runs: %+v", runs)
	}

	// Rescored with the second case's last turn asking for Bob: it passes,
	// and no model is called.
	before := calls
	fixed, err := eval.Parse("chat.json", []byte(`{"name": "chat", "cases": [
		{"name": "remembers", "conversation": [
			{"message": "My name is Ada."},
			{"message": "Who am I?", "assert": [{"type": "contains", "value": "Ada"}]}]},
		{"name": "forgets nothing", "tags": ["memory"], "conversation": [
			{"input": {"message": "My name is Bob."}, "assert": [{"type": "contains", "value": "Bob"}]},
			{"message": "Who am I?", "assert": [{"type": "contains", "value": "Bob"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	re, err := eval.Rescore(context.Background(), st, rep.ID, fixed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if re.Agents[0].Passed != 2 || calls != before {
		t.Errorf("the rescore: %d passed, %d model calls", re.Agents[0].Passed, calls-before)
	}
}

// TestConversationCaseChecked: a case is a conversation or has an input;
// each turn a message or an input.
func TestConversationCaseChecked(t *testing.T) {
	_, err := eval.Parse("bad.json", []byte(`{"name": "bad", "cases": [
		{"name": "both", "input": {}, "conversation": [{"message": "hi"}]},
		{"name": "empty turn", "conversation": [{}]},
		{"name": "neither"}]}`))
	for _, want := range []string{`cases[0] "both": a conversation's input, expected and assertions are its turns'`,
		`cases[1] "empty turn": conversation[0]: give a message or an input`, `cases[2] "neither": input (a JSON object) or conversation is required`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant it to say %s", err, want)
		}
	}
}
