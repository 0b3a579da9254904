package llm_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentry/agentry/llm"
	"github.com/agentry/agentry/llm/scripted"
)

func ExampleWithRetry() {
	script, _ := scripted.Parse("s", []byte(`{"turns": [
		{"error": {"status": 429, "message": "slow down", "retry_after_ms": 1}},
		{"content": "done"}]}`))
	p := llm.WithRetry(script.Model(), llm.RetryPolicy{Attempts: 3, InitialBackoff: time.Millisecond})
	ctx := llm.WithTrace(context.Background(), &llm.Trace{Retry: func(i llm.RetryInfo) {
		fmt.Println("retry after attempt", i.Attempt, "waiting", i.Wait, "because", i.Err)
	}})
	resp, err := p.Generate(ctx, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	fmt.Println(resp.Content, err)
	// Output:
	// retry after attempt 1 waiting 1ms because llm scripted: rate_limited (HTTP 429): slow down
	// done <nil>
}

func ExamplePricing_Cost() {
	cost, ok := llm.DefaultPricing().Cost("gpt-4.1-mini-2025-04-14", llm.Usage{PromptTokens: 1_000_000, CompletionTokens: 100_000})
	fmt.Printf("$%.2f %v\n", cost, ok)
	// Output: $0.56 true
}
