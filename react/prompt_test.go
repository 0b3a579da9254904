package react

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestSystemPromptGolden(t *testing.T) {
	got, err := SystemPrompt("", PromptData{
		Role: "Learning Agent", Capabilities: "choose the next card for a learner.",
		Tools: []Tool{{Name: "get_card", Description: "Read a card.", Parameters: `{"type":"object","properties":{"cardId":{"type":"string"}},"required":["cardId"]}`},
			{Name: "due_cards", Description: "List due cards.", Parameters: `{"type":"object"}`}},
		Examples:     []string{"Thought: I need the due cards.\nAction: due_cards\nAction Input: {}", "Thought: card_7 is overdue.\nFinal Answer: {\"next\": \"card_7\"}"},
		OutputSchema: `{"type":"object","required":["next"]}`,
		MaxTurns:     8, BudgetUSD: 0.05, Timeout: "30s",
		Task: `user_id = "u1"`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		os.WriteFile("testdata/v1.golden", []byte(got+"\n"), 0o644)
	}
	want, _ := os.ReadFile("testdata/v1.golden")
	if got+"\n" != string(want) {
		t.Errorf("prompt:\n%s\nwant:\n%s", got, want)
	}
	if _, err := SystemPrompt("v9", PromptData{}); err == nil {
		t.Error("unknown version accepted")
	}
	bare, _ := SystemPrompt("v1", PromptData{Role: "helper", MaxTurns: 3, Task: "x"})
	if bare == "" || len(Versions()) != 1 {
		t.Error("bare prompt")
	}
}
