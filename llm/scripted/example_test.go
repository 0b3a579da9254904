package scripted_test

import (
	"context"
	"fmt"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
)

func ExampleParse() {
	s, err := scripted.Parse("example", []byte(`{"turns": [
		{"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}], "usage": {"prompt_tokens": 12, "completion_tokens": 5}},
		{"content": "The answer is 3."}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	m := s.Model()
	r1, _ := m.Generate(context.Background(), &llm.Request{})
	r2, _ := m.Generate(context.Background(), &llm.Request{})
	_, err = m.Generate(context.Background(), &llm.Request{})
	fmt.Println(r1.ToolCalls[0].Name, string(r1.ToolCalls[0].Arguments), r1.Usage.TotalTokens)
	fmt.Println(r2.Content)
	fmt.Println(err)
	// Output:
	// add {"a": 1, "b": 2} 17
	// The answer is 3.
	// llm scripted: invalid_request: example: call 3 but the script has only 2 turns
}
