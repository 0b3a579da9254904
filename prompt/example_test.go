package prompt_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentry/agentry/prompt"
)

func ExampleAgentPrompt() {
	p, err := prompt.New(prompt.Config{
		AgentName: "A2", Version: "v1", Mode: "chooser",
		SystemText:   "You are A2 PromptShaper.",
		OutputSchema: json.RawMessage(`{"type": "object", "required": ["tone"], "properties": {"tone": {"type": "string", "enum": ["direct", "formal"]}}}`),
		Enums:        map[string][]string{"tone": {"direct", "formal"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	msgs, _, _ := p.Compose(map[string]any{"task": "Explain closures"})
	fmt.Println(msgs[1].Content)
	out, err := p.ParseAndValidate("```json\n{\"tone\": \"formal\"}\n```")
	fmt.Println(out, err)
	_, err = p.ParseAndValidate(`{"tone": "rude"}`)
	fmt.Println(err)
	// Output:
	// Input:
	// task = "Explain closures"
	//
	// Choose tone from ["direct", "formal"].
	//
	// Reply with a single JSON object only, no extra text, matching the schema.
	// map[tone:formal] <nil>
	// output does not match the schema: tone: value must be one of 'direct', 'formal'
}
